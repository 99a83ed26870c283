package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/flintkv/flint/internal/protocol"
	"github.com/flintkv/flint/internal/store"
)

// doneBackend applies nothing: every entry succeeds. It records the size of
// each batch.
type doneBackend struct {
	Local
	bytes []int // encoded size of each batch
}

func (b *doneBackend) Apply(_ context.Context, batch []byte, done func(int, store.Result)) error {
	b.bytes = append(b.bytes, len(batch))
	for i := 0; len(batch) > 0; i++ {
		l, w := binary.Uvarint(batch)
		batch = batch[w+int(l):]
		done(i, store.Result{Done: true})
	}
	return nil
}

// testConn returns a connection to kv that is never served: tests call its
// methods directly.
func testConn(t testing.TB, kv Backend) *conn {
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	return newConn(New(Config{}, kv), a, 1)
}

func TestBatchByteLimit(t *testing.T) {
	kv := &doneBackend{}
	c := testConn(t, kv)
	val := make([]byte, 1<<20)
	set := [][]byte{[]byte("SET"), []byte("k"), val}
	for range 9 {
		c.exec(set)
	}
	c.commit()
	// A fourth 1 MiB value and its framing would pass 4 MiB: the batch is
	// committed before it.
	if len(kv.bytes) != 3 || kv.bytes[0] != kv.bytes[1] || kv.bytes[1] != kv.bytes[2] ||
		kv.bytes[0] < 3<<20 || kv.bytes[0] > maxBatchBytes {
		t.Fatalf("batches of %v bytes, want three of 3 MiB and their framing", kv.bytes)
	}
	if want := bytes.Repeat([]byte("+OK\r\n"), 9); !bytes.Equal(c.out, want) {
		t.Fatalf("replies %q, want %q", c.out, want)
	}
}

// TestLongCommandAlone checks that a command longer than maxBatchBytes
// goes to the backend in a batch of its own, so that a backend that refuses
// it refuses nothing else, that the writes after it batch again, and that
// replies, a deferred read's among them, keep the commands' order.
func TestLongCommandAlone(t *testing.T) {
	kv := &doneBackend{Local: Local{S: store.New(store.Options{})}}
	c := testConn(t, kv)
	small := [][]byte{[]byte("SET"), []byte("a"), []byte("1")}
	get := [][]byte{[]byte("GET"), []byte("a")} // deferred: doneBackend stores nothing
	long := [][]byte{[]byte("SET"), []byte("b"), make([]byte, maxBatchBytes+1)}
	for _, cmd := range [][][]byte{small, get, small, long, small, get, small} {
		c.exec(cmd)
	}
	c.commit()
	// An entry holds the key and value, not the command name.
	want := []int{2 * store.AddSize(small[1:]...), store.AddSize(long[1:]...), 2 * store.AddSize(small[1:]...)}
	if !slices.Equal(kv.bytes, want) {
		t.Fatalf("batches of %v bytes, want %v", kv.bytes, want)
	}
	if want := "+OK\r\n$-1\r\n+OK\r\n+OK\r\n+OK\r\n$-1\r\n+OK\r\n"; string(c.out) != want {
		t.Fatalf("replies %q, want %q", c.out, want)
	}
}

// applyThread is Local with an apply thread of its own, as
// replica.Replica has: Apply applies the batch's entries one at a time on
// another goroutine, calling done after each, then between(i) if set, while
// the caller waits. With fail > 0 it stops before entry fail-1 and returns
// errFailed, the entries before it applied.
type applyThread struct {
	Local
	between func(i int)
	fail    int
}

var errFailed = errors.New("failed")

func (b *applyThread) Apply(_ context.Context, batch []byte, done func(int, store.Result)) error {
	errc := make(chan error)
	go func() {
		for i := 0; len(batch) > 0; i++ {
			if i == b.fail-1 {
				errc <- errFailed
				return
			}
			l, w := binary.Uvarint(batch)
			res, err := b.S.Apply(batch[w : w+int(l)])
			if err != nil {
				errc <- err
				return
			}
			batch = batch[w+int(l):]
			done(i, res)
			if b.between != nil {
				b.between(i)
			}
		}
		errc <- nil
	}()
	return <-errc
}

// cmd splits a command for exec.
func cmd(s string) [][]byte { return bytes.Fields([]byte(s)) }

// execAll executes cmds on c, then commits.
func execAll(c *conn, cmds ...string) {
	for _, s := range cmds {
		c.exec(cmd(s))
	}
	c.commit()
}

// TestApplyThreadOnlyRecords checks that Apply's done callback, called on
// the backend's goroutine, formats no reply: while Apply runs the
// connection's output holds only the replies before the batch, and every
// other reply, deferred reads' and large values' included, appears once
// Apply returns, in order.
func TestApplyThreadOnlyRecords(t *testing.T) {
	kv := &applyThread{Local: Local{S: store.New(store.Options{})}}
	c := testConn(t, kv)
	big := strings.Repeat("b", 4000)
	var calls int
	kv.between = func(int) {
		calls++
		if string(c.out) != "+PONG\r\n" || c.hits+c.misses != 0 {
			t.Errorf("during Apply: output %q, %d hits and %d misses; want only the PONG before the batch, none", c.out, c.hits, c.misses)
		}
	}
	execAll(c, "PING", "SET a 1", "GET a", "MGET a nosuch", "SET big "+big, "GET big", "EXISTS a big nosuch",
		"STRLEN big", "INCR a", "GET a", "SET a x GET")
	if calls != 4 {
		t.Fatalf("%d entries applied, want 4", calls)
	}
	want := "+PONG\r\n+OK\r\n$1\r\n1\r\n*2\r\n$1\r\n1\r\n$-1\r\n+OK\r\n$4000\r\n" + big + "\r\n:2\r\n:4000\r\n" +
		":2\r\n$1\r\n2\r\n$1\r\n2\r\n"
	if string(c.out) != want {
		t.Fatalf("replies %q, want %q", c.out, want)
	}
	if c.hits != 4 || c.misses != 1 {
		t.Fatalf("%d hits and %d misses, want 4 and 1", c.hits, c.misses)
	}
}

// TestDeferredReadsSeeTheirPlace checks that a read pipelined among writes
// sees the writes before it and none after it, another client's writes
// included: another client's write applied between two writes of the
// batch is seen by the reads after the first of them only from the second
// on, and the batch's later writes are not seen by the reads before them.
func TestDeferredReadsSeeTheirPlace(t *testing.T) {
	kv := &applyThread{Local: Local{S: store.New(store.Options{})}}
	kv.between = func(i int) {
		if i == 1 {
			kv.S.Apply(store.AppendEntry(nil, store.OpSet, 0, []byte("k"), []byte("other")))
		}
	}
	c := testConn(t, kv)
	execAll(c, "SET k 1", "GET k", "SET k 2", "GET k", "STRLEN k", "SET j 3", "MGET k j", "EXISTS k j")
	want := "+OK\r\n$1\r\n1\r\n+OK\r\n$1\r\n2\r\n:1\r\n+OK\r\n*2\r\n$5\r\nother\r\n$1\r\n3\r\n:2\r\n"
	if string(c.out) != want {
		t.Fatalf("replies %q, want %q", c.out, want)
	}
}

// TestApplyFailsPartway checks that when Apply fails after reporting some
// writes, those get their replies, the others the error, and the reads
// after the failure run where the batch stopped, after the writes that took
// effect.
func TestApplyFailsPartway(t *testing.T) {
	kv := &applyThread{Local: Local{S: store.New(store.Options{})}, fail: 2}
	c := testConn(t, kv)
	execAll(c, "SET a 1", "GET a", "SET b 2", "GET b", "SET c 3", "MGET a b c")
	want := "+OK\r\n$1\r\n1\r\n-ERR failed\r\n$-1\r\n-ERR failed\r\n*3\r\n$1\r\n1\r\n$-1\r\n$-1\r\n"
	if string(c.out) != want {
		t.Fatalf("replies %q, want %q", c.out, want)
	}
}

// TestWriteAllocs checks that adding a write to the batch and replying to
// it allocate nothing once the connection's buffers have grown. (INCRBY is
// left out: its store.DeltaArg allocates under the race detector.)
func TestWriteAllocs(t *testing.T) {
	c := testConn(t, &doneBackend{bytes: make([]int, 0, 100)})
	cmds := [][][]byte{
		{[]byte("SET"), []byte("k"), []byte("v")},
		// Lower case: SET lower-cases its options, allocating for upper case.
		{[]byte("SET"), []byte("k"), []byte("v"), []byte("nx")},
		{[]byte("SET"), []byte("k"), []byte("v"), []byte("get")},
		{[]byte("SETNX"), []byte("k"), []byte("v")},
		{[]byte("DEL"), []byte("k"), []byte("l")},
		{[]byte("APPEND"), []byte("k"), []byte("v")},
		{[]byte("CAS"), []byte("k"), []byte("v"), []byte("w")},
		{[]byte("GETSET"), []byte("k"), []byte("v")},
		{[]byte("MSET"), []byte("k"), []byte("v"), []byte("l"), []byte("w")},
	}
	run := func() {
		for range 100 {
			for _, args := range cmds {
				c.exec(args)
			}
		}
		c.commit()
		c.out = c.out[:0]
	}
	run()
	if n := testing.AllocsPerRun(10, run); n != 0 {
		t.Fatalf("%v allocations per %d writes, want 0", n, 100*len(cmds))
	}
}

// TestTryWriteAllocatesNothing checks that writing replies to a socket that
// takes them costs no allocation: it is done once per batch, which is once
// per command for a client that does not pipeline.
func TestTryWriteAllocatesNothing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	go io.Copy(io.Discard, client)
	nc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var o output
	o.init(nc, func() bool { return false })
	reply := []byte("+OK\r\n")
	allocs := testing.AllocsPerRun(100, func() {
		if n, err := o.tryWrite(reply); n != len(reply) || err != nil {
			t.Fatalf("tryWrite wrote %d of %d bytes: %v", n, len(reply), err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per tryWrite, want 0", allocs)
	}
}

// TestPrefetchAheadStops checks where prefetchAhead stops looking, which
// it returns: after the commands whose keys fill one prefetch, after the
// first write, before a command with more arguments than a prefetch could
// use, at aheadCommands commands, and at the end of the input if a command
// there is not complete yet (so that it is not looked at again).
func TestPrefetchAheadStops(t *testing.T) {
	c := testConn(t, Local{S: store.New(store.Options{})})
	get := respCommand("GET", "k")
	many := func(n int, cmd string) string { return strings.Repeat(cmd, n) }
	mget := []string{"MGET"}
	for range store.PrefetchKeys + 1 {
		mget = append(mget, "k")
	}
	for _, tc := range []struct {
		name, in string
		want     int
		refused  bool // ends at a command aheadLimits refuse: the parser's error allocates
	}{
		{"reads", many(3, get), 3 * len(get), false},
		{"one prefetch's keys", many(2*store.PrefetchKeys, get), store.PrefetchKeys * len(get), false},
		{"a write", get + respCommand("SET", "k", "v") + get, len(get) + len(respCommand("SET", "k", "v")), false},
		{"a command cut short", get + get[:len(get)-3], 2*len(get) - 3, false},
		{"more arguments than keys to prefetch", get + respCommand(mget...) + get, len(get), true},
		{"a long key, not prefetched", get + respCommand("GET", strings.Repeat("k", 2<<10)) + get, 2*len(get) + len(respCommand("GET", strings.Repeat("k", 2<<10))), false},
		{"a large write", get + respCommand("SET", "k", strings.Repeat("v", 2<<10)) + get, len(get) + len(respCommand("SET", "k", strings.Repeat("v", 2<<10))), false},
		{"a long name", respCommand(strings.Repeat("x", 40)) + get, len(respCommand(strings.Repeat("x", 40))) + len(get), false},
		{"other commands", many(2*aheadCommands, respCommand("PING")), aheadCommands * len(respCommand("PING")), false},
	} {
		in := []byte(tc.in)
		if got := c.prefetchAhead(in); got != tc.want {
			t.Errorf("%s: prefetchAhead looked at %d bytes, want %d", tc.name, got, tc.want)
		}
		if n := testing.AllocsPerRun(10, func() { c.prefetchAhead(in) }); n != 0 && !tc.refused {
			t.Errorf("%s: prefetchAhead allocates %.0f times", tc.name, n)
		}
	}
}

// respCommand encodes args as a client sends them.
func respCommand(args ...string) string {
	var bs [][]byte
	for _, a := range args {
		bs = append(bs, []byte(a))
	}
	return string(protocol.AppendCommand(nil, bs...))
}

// BenchmarkPipelineReads measures pipelines of 1,024 GETs of random keys,
// of a store of 1K keys with 128-byte values, which fits the CPU's caches,
// and of one of 1M, which does not, against a backend that applies on a
// goroutine of its own, without the network: "deferred" after a SET, whose
// batch they join, and "now" alone. It reports ns per command, and the
// process's CPU time per command, which other load on the machine disturbs
// less.
//
//	go test -run '^$' -bench PipelineReads -count 6 ./internal/server/
func BenchmarkPipelineReads(b *testing.B) {
	const depth = 1024
	key := func(i int) []byte { return []byte("key:" + strconv.Itoa(i)) }
	val := bytes.Repeat([]byte("v"), 128)
	for _, size := range []struct {
		name string
		keys int
	}{{"1K", 1_000}, {"1M", 1_000_000}} {
		s := store.New(store.Options{})
		var batch store.Batch
		for i := range size.keys {
			batch.Add(store.OpSet, 0, key(i), val)
			if batch.Len() == 1024 || i == size.keys-1 {
				if err := s.ApplyBatch(batch.Bytes(), nil); err != nil {
					b.Fatal(err)
				}
				batch.Reset()
			}
		}
		c := testConn(b, &applyThread{Local: Local{S: s}})
		rng := rand.New(rand.NewPCG(1, 2))
		for _, run := range []struct {
			name string
			set  bool
		}{{"deferred", true}, {"now", false}} {
			pipelines := make([][][][]byte, 64)
			for i := range pipelines {
				var p [][][]byte
				if run.set {
					p = append(p, [][]byte{[]byte("SET"), key(rng.IntN(size.keys)), val})
				}
				for len(p) < depth {
					p = append(p, [][]byte{[]byte("GET"), key(rng.IntN(size.keys))})
				}
				pipelines[i] = p
			}
			b.Run(size.name+"/"+run.name, func(b *testing.B) {
				cpu := processCPU(b)
				for i := range b.N {
					for _, args := range pipelines[i%len(pipelines)] {
						c.exec(args)
					}
					c.commit()
					c.out = c.out[:0]
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*depth), "ns/command")
				b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N*depth), "cpu-ns/command")
			})
		}
	}
}

// processCPU returns the CPU time the process has used, user and system, in
// nanoseconds.
func processCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
