package server_test

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/flintkv/flint/internal/protocol"
	"github.com/flintkv/flint/internal/server"
)

// TestManyArgumentsBounded checks that the arguments of a command count
// towards MaxQueryBuffer besides their bytes: 5,000 empty arguments are
// 30 KB of input but take the server 200 KB, over a 64 KiB limit.
func TestManyArgumentsBounded(t *testing.T) {
	srv := start(t, server.Config{MaxQueryBuffer: 64 << 10, MaxBulk: 1 << 10})
	raw := dialRaw(t, srv.Addr)
	go func() {
		raw.SetWriteDeadline(time.Now().Add(liveness))
		raw.Write([]byte("*1000000\r\n" + strings.Repeat("$0\r\n\r\n", 5000)))
	}()
	raw.expect("(error) ERR Protocol error: query buffer limit exceeded")
	raw.expectClosed()
	// At the defaults, the same command is parsed to its end.
	srv = start(t, server.Config{})
	raw = dialRaw(t, srv.Addr)
	raw.send("*5001\r\n$4\r\nECHO\r\n" + strings.Repeat("$0\r\n\r\n", 5000))
	raw.expect("(error) ERR wrong number of arguments for 'echo' command")
}

// TestInputMemoryShared checks MaxInputMemory: two clients each sending a
// command that needs a 1 MiB buffer, where the server has room for one
// such buffer beyond the first 256 KiB of each: one of them is refused and
// closed, the other's command runs, and once it is done the room is free
// again.
func TestInputMemoryShared(t *testing.T) {
	const mib = 1 << 20
	srv := start(t, server.Config{MaxQueryBuffer: mib, MaxBulk: mib, MaxInputMemory: mib})
	value := strings.Repeat("v", 900<<10)
	cmd := command("SET", "k", value)
	conns := []*rawConn{dialRaw(t, srv.Addr), dialRaw(t, srv.Addr)}
	replies := make(chan int, 2)
	for i, c := range conns {
		c.send(cmd[:600<<10]) // both buffers grow past 512 KiB
		go func() {
			c.SetReadDeadline(time.Now().Add(liveness))
			if v, err := c.rd.Read(); err == nil && v.String() == "(error) ERR Protocol error: the server's memory for large commands is in use (max-input-memory)" {
				replies <- i
			} else {
				replies <- -1
			}
		}()
	}
	refused := <-replies
	if refused < 0 {
		t.Fatal("neither client got the input memory error")
	}
	conns[refused].expectClosed()
	ok := conns[1-refused]
	ok.send(cmd[600<<10:])
	if got := <-replies; got != -1 {
		t.Fatalf("both clients refused")
	}
	if v, found := srv.Store.Get([]byte("k")); !found || len(v) != len(value) {
		t.Fatalf("k holds %d bytes, want %d", len(v), len(value))
	}
	// The room is given back: another client's large command runs, once
	// the refused connection is gone.
	eventually(t, "a large command to fit", func() bool {
		c := dialRaw(t, srv.Addr)
		c.send(command("SET", "k2", value))
		v := c.read()
		return v.Kind != protocol.KindError
	})
}

// TestDeclaredBulkNotAllocated checks that a client declaring the largest
// bulk string the defaults allow (512 MiB) and sending a few bytes of it
// makes the server allocate what arrived, not what was declared.
func TestDeclaredBulkNotAllocated(t *testing.T) {
	srv := start(t, server.Config{})
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	raw := dialRaw(t, srv.Addr)
	// The PONG shows that the server read the write, and so the header.
	raw.send("PING\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$536870912\r\nabc")
	raw.expectBytes("+PONG\r\n")
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
		t.Fatalf("allocated %d MiB for a declared 512 MiB bulk", grew>>20)
	}
}
