package server_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flintkv/flint/internal/protocol"
	"github.com/flintkv/flint/internal/server"
)

// TestProtocolErrors sends malformed and over-limit requests. Each gets one
// "-ERR Protocol error: ..." reply, after the replies to the good commands
// before it, and then the server closes the connection.
func TestProtocolErrors(t *testing.T) {
	srv := start(t, server.Config{MaxBulk: 1024, MaxArgs: 8, MaxInline: 256})
	for _, tc := range []struct {
		send  string
		first []string // replies to the good commands before the bad one
		reply string
	}{
		{send: "*2\r\n$3\r\nGET\r\n$1025\r\n", reply: "invalid bulk length"},
		{send: "*2\r\n$3\r\nGET\r\n$99999999999999999999999\r\n", reply: "invalid bulk length"},
		{send: "*2\r\n$3\r\nGET\r\n$-5\r\n", reply: "invalid bulk length"},
		{send: "*1\r\n$-1\r\n", reply: "invalid bulk length"},
		{send: "*1\r\n$" + strings.Repeat("9", 100), reply: "invalid bulk length"},
		{send: "*9\r\n", reply: "invalid multibulk length"},
		{send: "*1048576\r\n", reply: "invalid multibulk length"},
		{send: "*x\r\n", reply: "invalid multibulk length"},
		{send: "*\x00\xff\x80\r\n", reply: "invalid multibulk length"},
		{send: "*" + strings.Repeat("1", 40), reply: "invalid multibulk length"},
		{send: "*1\r\nxyz\r\n", reply: "expected '$', got 'x'"},
		{send: "*1\r\n\xfe\r\n", reply: "expected '$', got '\xfe'"}, // the byte itself, as Redis
		{send: "a b c d e f g h i\r\n", reply: "too many arguments in inline request"},
		{send: strings.Repeat("a", 300), reply: "too big inline request"},
		{send: "ECHO " + strings.Repeat("a", 300) + "\r\n", reply: "too big inline request"},
		{send: "SET k \"v\r\n", reply: "unbalanced quotes in request"},
		{send: "PING\r\n*x\r\n", first: []string{`"PONG"`}, reply: "invalid multibulk length"},
		{
			send:  command("SET", "x", "1") + command("INCR", "x") + command("foo") + "*1\r\n@",
			first: []string{`"OK"`, "2", "(error) ERR unknown command 'foo', with args beginning with: "},
			reply: "expected '$', got '@'",
		},
	} {
		raw := dialRaw(t, srv.Addr)
		raw.send(tc.send)
		for _, r := range tc.first {
			raw.expect(r)
		}
		raw.expect("(error) ERR Protocol error: " + tc.reply)
		raw.expectClosed()
	}
	// Empty commands are skipped, not errors; so are the two bytes after a
	// bulk string, whatever they are, and the byte after a length's CR: as
	// redis-server 7.0 does.
	raw := dialRaw(t, srv.Addr)
	raw.send("*0\r\n*-1\r\n*-10\r\n\r\n" + command("PING"))
	raw.expectBytes("+PONG\r\n")
	raw.send("*1\r\n$4\r\nPINGxx*2\rx$4\r\nECHO\r\n$1\r\nabc\r\n")
	raw.expectBytes("+PONG\r\n$1\r\na\r\n") // "bc" skipped, then "\r\n" is a blank line
	// At the limits exactly, commands work.
	raw.send(command("SET", "k", strings.Repeat("v", 1024)))
	raw.expect(`"OK"`)
	raw.send(command("MSET", "a", "1", "b", "2", "c", "3", "d"))
	raw.expect("(error) ERR wrong number of arguments for 'mset' command")
	raw.send("ECHO " + strings.Repeat("a", 251) + "\r\n")
	raw.expect(`"` + strings.Repeat("a", 251) + `"`)
}

// TestGarbage sends random bytes on many connections. The server answers
// each with well-formed replies, closes it, and keeps serving others.
func TestGarbage(t *testing.T) {
	srv := start(t, server.Config{MaxBulk: 1024, MaxArgs: 8, MaxInline: 256})
	rng := rand.New(rand.NewPCG(testSeed(t), 1))
	alphabet := []byte("*$\r\n0123456789-: \"'\\xabc\x00\xff")
	for i := range 100 {
		junk := make([]byte, 1+rng.IntN(300))
		for j := range junk {
			if rng.IntN(2) == 0 {
				junk[j] = alphabet[rng.IntN(len(alphabet))]
			} else {
				junk[j] = byte(rng.IntN(256))
			}
		}
		raw := dialRaw(t, srv.Addr)
		raw.send(string(junk))
		raw.Conn.(interface{ CloseWrite() error }).CloseWrite()
		for {
			raw.SetReadDeadline(time.Now().Add(liveness))
			v, err := raw.rd.Read()
			if err != nil {
				if !closedErr(err) {
					t.Fatalf("junk %d %q: %v", i, junk, err)
				}
				break
			}
			if v.IsError() && strings.HasPrefix(string(v.Str), "ERR Protocol error: ") {
				raw.expectClosed()
				break
			}
		}
	}
	rdb := newClient(t, srv.Addr, nil)
	if err := rdb.Ping(ctx(t)).Err(); err != nil {
		t.Fatalf("server after garbage: %v", err)
	}
}

// TestStalledClient checks that a client that sends half a command and
// stops does not hold up others, and is dropped once idle for IdleTimeout.
func TestStalledClient(t *testing.T) {
	const half = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nva"
	t.Run("no idle timeout", func(t *testing.T) {
		srv := start(t, server.Config{})
		staller := dialRaw(t, srv.Addr)
		staller.send(half)
		rdb := newClient(t, srv.Addr, nil)
		c := ctx(t)
		for i := range 100 {
			if err := rdb.Set(c, "other", i, 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(100 * time.Millisecond)
		// The server kept the half command and finishes it.
		staller.send("lue\r\n")
		staller.expect(`"OK"`)
		if v := rdb.Get(c, "k").Val(); v != "value" {
			t.Fatalf("k = %q", v)
		}
	})
	t.Run("idle timeout", func(t *testing.T) {
		const idle = time.Second
		srv := start(t, server.Config{IdleTimeout: idle})
		begin := time.Now()
		staller := dialRaw(t, srv.Addr)
		staller.send(half)
		// A client that keeps talking is not idle.
		active := dialRaw(t, srv.Addr)
		done := make(chan struct{})
		go func() {
			defer close(done)
			staller.expectClosed()
		}()
		pings := 0
	loop:
		for {
			select {
			case <-done:
				break loop
			case <-time.After(100 * time.Millisecond):
				active.send("PING\r\n")
				active.expect(`"PONG"`)
				pings++
			}
		}
		if dropped := time.Since(begin); dropped < idle {
			t.Fatalf("stalled client dropped after %v, before IdleTimeout %v", dropped, idle)
		}
		for range 5 {
			time.Sleep(100 * time.Millisecond)
			active.send("PING\r\n")
			active.expect(`"PONG"`)
		}
		if _, ok := srv.Store.Get([]byte("k")); ok {
			t.Fatal("the dropped client's half command was executed")
		}
		t.Logf("active client sent %d pings while the staller waited", pings)
	})
}

// TestClientThatDoesNotRead pipelines many GETs of a large value and never
// reads a reply. The server must not buffer the replies: its connection
// goroutine blocks on the write, the client is dropped after OutputTimeout,
// and other clients are served throughout.
func TestClientThatDoesNotRead(t *testing.T) {
	// After a write, the GETs are deferred reads, whose values Apply's
	// callback looks up (see commit.go): their replies must be bounded too.
	for _, first := range []string{"", command("SET", "x", "1")} {
		t.Run(fmt.Sprintf("write first=%v", first != ""), func(t *testing.T) { testClientThatDoesNotRead(t, first) })
	}
}

func testClientThatDoesNotRead(t *testing.T, first string) {
	const outputTimeout = 500 * time.Millisecond
	srv := start(t, server.Config{MaxOutputBuffer: 64 << 10, OutputTimeout: outputTimeout})
	c := ctx(t)
	other := newClient(t, srv.Addr, &redis.Options{PoolSize: 1})
	const valueSize, gets = 256 << 10, 2000 // 500 MiB of replies
	if err := other.Set(c, "big", strings.Repeat("b", valueSize), 0).Err(); err != nil {
		t.Fatal(err)
	}
	other.Set(c, "small", "s", 0)

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	begin := time.Now()
	sleeper := dialRaw(t, srv.Addr)
	me := "addr=" + sleeper.LocalAddr().String() + " "
	listed := func() bool { return strings.Contains(other.ClientList(c).Val(), me) }
	sleeper.send(first + strings.Repeat(command("GET", "big"), gets))
	eventually(t, "the client in CLIENT LIST", listed)
	// Others are served while the sleeper's connection is stuck.
	served := 0
	for listed() {
		if time.Since(begin) > liveness {
			t.Fatalf("client that does not read was not dropped after %v", liveness)
		}
		if v, err := other.Get(c, "small").Result(); err != nil || v != "s" {
			t.Fatalf("GET from another client: %q, %v", v, err)
		}
		served++
		time.Sleep(5 * time.Millisecond) // keep this client's own allocations small
	}
	if d := time.Since(begin); d < outputTimeout {
		t.Fatalf("dropped after %v, before OutputTimeout %v", d, outputTimeout)
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	// What the server allocated while it had 500 MiB of replies to send is
	// at most a few buffers; the bound is generous.
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Fatalf("allocated %d MiB while a client did not read", grew>>20)
	}
	// Reading now finds what the kernel had buffered, then the end.
	sleeper.SetReadDeadline(time.Now().Add(liveness))
	n, err := io.Copy(io.Discard, sleeper.br)
	if err != nil && !closedErr(err) {
		t.Fatalf("reading the dropped connection: %v", err)
	}
	if n >= int64(gets)*valueSize {
		t.Fatalf("read %d bytes: every reply was sent", n)
	}
	t.Logf("other client served %d GETs; the dropped client got %d KiB; the process allocated %d KiB meanwhile",
		served, n>>10, (after.TotalAlloc-before.TotalAlloc)>>10)
	if err := other.Ping(c).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestQueryBufferLimit checks MaxQueryBuffer: a command larger than it is
// refused and the connection closed; pipelines of any length are fine, since
// only one command needs to fit.
func TestQueryBufferLimit(t *testing.T) {
	srv := start(t, server.Config{MaxQueryBuffer: 64 << 10, MaxBulk: 1 << 20})
	c := ctx(t)
	rdb := newClient(t, srv.Addr, nil)
	if err := rdb.Set(c, "fits", strings.Repeat("f", 40<<10), 0).Err(); err != nil {
		t.Fatal(err)
	}
	raw := dialRaw(t, srv.Addr)
	go raw.Write([]byte(strings.Repeat("PING\r\n", 50000))) // 300 KB of commands in one write
	for range 50000 {
		raw.expectBytes("+PONG\r\n")
	}

	big := dialRaw(t, srv.Addr)
	go func() { // the server stops reading part way
		big.SetWriteDeadline(time.Now().Add(liveness))
		big.Write([]byte(command("SET", "k", strings.Repeat("x", 100000))))
	}()
	big.expect("(error) ERR Protocol error: query buffer limit exceeded")
	big.expectClosed()
	if _, ok := srv.Store.Get([]byte("k")); ok {
		t.Fatal("the oversized command was executed")
	}
	if v, err := rdb.StrLen(c, "fits").Result(); err != nil || v != 40<<10 {
		t.Fatalf("STRLEN fits = %d, %v", v, err)
	}
}

// TestMaxClients checks that connections beyond MaxClients are refused with
// an error, and admitted again once others leave.
func TestMaxClients(t *testing.T) {
	srv := start(t, server.Config{MaxClients: 3})
	conns := make([]*rawConn, 3)
	for i := range conns {
		conns[i] = dialRaw(t, srv.Addr)
		conns[i].send("PING\r\n")
		conns[i].expect(`"PONG"`)
	}
	extra := dialRaw(t, srv.Addr)
	extra.expect("(error) ERR max number of clients reached")
	extra.expectClosed()
	conns[0].send(command("INFO", "stats"))
	if v := conns[0].read(); !strings.Contains(string(v.Str), "rejected_connections:1\r\n") {
		t.Fatalf("INFO stats after one refusal:\n%s", v.Str)
	}

	// go-redis sees the error or, when the server closed before it read
	// it, a broken connection (as with Redis).
	rdb := newClient(t, srv.Addr, nil)
	if err := rdb.Ping(ctx(t)).Err(); err == nil {
		t.Fatal("go-redis connected over MaxClients")
	}

	conns[0].Close()
	eventually(t, "a free slot", func() bool {
		nc, err := net.Dial("tcp", srv.Addr)
		if err != nil {
			return false
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(liveness))
		if _, err := nc.Write([]byte("PING\r\n")); err != nil {
			return false
		}
		v, err := protocol.NewReader(bufio.NewReader(nc), protocol.DefaultReaderLimits).Read()
		return err == nil && v.String() == `"PONG"`
	})
}

// TestLargeValue round-trips an 8 MiB value, far larger than
// MaxOutputBuffer, through every command that returns values.
func TestLargeValue(t *testing.T) {
	srv := start(t, server.Config{MaxOutputBuffer: 64 << 10})
	c := ctx(t)
	big := make([]byte, 8<<20)
	for i := range big {
		big[i] = byte(i*31 + i>>13)
	}
	bigs := string(big)
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) {
			rdb := newClient(t, srv.Addr, &redis.Options{Protocol: proto})
			rdb.FlushAll(c)
			if err := rdb.Set(c, "big", bigs, 0).Err(); err != nil {
				t.Fatal(err)
			}
			if v, err := rdb.Get(c, "big").Result(); err != nil || v != bigs {
				t.Fatalf("GET big: %d bytes, %v", len(v), err)
			}
			rdb.Set(c, "small", "s", 0)
			vals, err := rdb.MGet(c, "big", "small", "missing", "big").Result()
			if err != nil || vals[0] != bigs || vals[1] != "s" || vals[2] != nil || vals[3] != bigs {
				t.Fatalf("MGET with big values failed: %v", err)
			}
			if old, err := rdb.Do(c, "GETSET", "big", bigs[1:]).Text(); err != nil || old != bigs {
				t.Fatalf("GETSET big: %d bytes, %v", len(old), err)
			}
			if n, err := rdb.Append(c, "big", bigs[:1]).Result(); err != nil || n != int64(len(bigs)) {
				t.Fatalf("APPEND big = %d, %v", n, err)
			}
			rng, err := rdb.Do(c, "RANGE", "a", "z").StringSlice()
			want := []string{"big", bigs[1:] + bigs[:1], "small", "s"}
			if err != nil || len(rng) != 4 || rng[0] != want[0] || rng[1] != want[1] || rng[2] != want[2] || rng[3] != want[3] {
				t.Fatalf("RANGE with a big value failed: %d elements, %v", len(rng), err)
			}
			// One big request then big replies: a pipeline that sends more
			// after a big reply is TestPipelineLargeBothWays.
			pipe := rdb.Pipeline()
			pipe.Set(c, "big", bigs, 0)
			gets := []*redis.StringCmd{pipe.Get(c, "big"), pipe.Get(c, "small"), pipe.Get(c, "big")}
			if _, err := pipe.Exec(c); err != nil {
				t.Fatal(err)
			}
			for i, g := range gets {
				if want := []string{bigs, "s", bigs}[i]; g.Val() != want {
					t.Fatalf("pipelined GET %d: %d bytes", i, len(g.Val()))
				}
			}
		})
	}
	// On the wire: the streamed value is framed exactly, and the replies
	// around it are intact.
	raw := dialRaw(t, srv.Addr)
	raw.send(command("PING") + command("GET", "big") + command("GET", "small"))
	raw.expectBytes("+PONG\r\n")
	raw.expectBytes(fmt.Sprintf("$%d\r\n", len(big)))
	raw.expectBytes(bigs + "\r\n")
	raw.expectBytes("$1\r\ns\r\n")
	if v, ok := srv.Store.Get([]byte("big")); !ok || !bytes.Equal(v, big) {
		t.Fatal("the store does not hold the big value as sent")
	}
}

// TestPipelineLargeBothWays sends a go-redis pipeline whose requests and
// replies are both larger than the socket buffers can hold.
func TestPipelineLargeBothWays(t *testing.T) {
	srv := start(t, server.Config{OutputTimeout: 5 * time.Second})
	rdb := newClient(t, srv.Addr, nil)
	c := ctx(t)
	val := strings.Repeat("v", 1000)
	rdb.Set(c, "val", val, 0)
	pipe := rdb.Pipeline()
	var gets []*redis.StringCmd
	for i := range 20000 {
		pipe.Set(c, fmt.Sprintf("k%d", i), val, 0)
		gets = append(gets, pipe.Get(c, "val"))
	}
	if _, err := pipe.Exec(c); err != nil {
		t.Fatal(err)
	}
	for _, g := range gets {
		if g.Val() != val {
			t.Fatal("wrong reply")
		}
	}
}

// TestPipelineLargeRepliesSmallOutputBuffer pipelines RANGE replies much
// larger than MaxOutputBuffer, interleaved with writes, from a client that
// reads nothing until it has written everything: the server must go on
// reading while a single command's reply waits to drain.
func TestPipelineLargeRepliesSmallOutputBuffer(t *testing.T) {
	srv := start(t, server.Config{MaxOutputBuffer: 64 << 10, OutputTimeout: 10 * time.Second})
	rdb := newClient(t, srv.Addr, nil)
	c := ctx(t)
	val := strings.Repeat("x", 1024)
	load := rdb.Pipeline()
	for i := range 2000 {
		load.Set(c, fmt.Sprintf("r%04d", i), val, 0)
	}
	if _, err := load.Exec(c); err != nil {
		t.Fatal(err)
	}
	pipe := rdb.Pipeline()
	var ranges []*redis.Cmd
	for i := range 20 {
		ranges = append(ranges, pipe.Do(c, "RANGE", "r", "s"))
		pipe.Set(c, fmt.Sprintf("w%d", i), strings.Repeat("y", 100<<10), 0)
	}
	if _, err := pipe.Exec(c); err != nil {
		t.Fatal(err)
	}
	for i, r := range ranges {
		got, err := r.Slice()
		if err != nil || len(got) != 4000 || got[1] != val {
			t.Fatalf("range %d: %d elements, err %v", i, len(got), err)
		}
	}
}

// TestStalledReaderWithPendingRepliesIsNotIdle stops reading a reply larger
// than the kernel's socket buffers for longer than IdleTimeout, then reads it
// all: while replies wait to go out, the client is governed by OutputTimeout,
// not IdleTimeout (found in review: the idle deadline stayed armed while
// replies were backed up, and the client was dropped).
func TestStalledReaderWithPendingRepliesIsNotIdle(t *testing.T) {
	// The idle clock starts again once the reply is out: the client then has
	// IdleTimeout to read the part the kernel holds and send PING, which
	// under -race on a busy machine takes well over half a second.
	srv := start(t, server.Config{IdleTimeout: 2 * time.Second, OutputTimeout: 20 * time.Second})
	val := strings.Repeat("x", 24<<20)
	set := command("SET", "k", val) // built before connecting: under -race it takes a while
	c := dialRaw(t, srv.Addr)
	c.send(set)
	c.expect(`"OK"`)
	c.send(command("GET", "k"))
	time.Sleep(5 * time.Second)
	c.expectBytes(fmt.Sprintf("$%d\r\n", len(val)))
	c.expectBytes(val + "\r\n")
	c.send(command("PING"))
	c.expectBytes("+PONG\r\n")
}
