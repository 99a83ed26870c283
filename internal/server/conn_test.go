package server

import (
	"net"
	"testing"
)

// TestInputBufferFollowsPipelines checks fill's and consume's sizing of
// the input buffer, over a net.Pipe, whose reads return what one write
// sent, up to the reader's buffer: a read that fills the buffer doubles it
// for the next read, up to readAhead; a buffer larger than keepIdle is kept
// until a pass uses less than inInitial of it.
func TestInputBufferFollowsPipelines(t *testing.T) {
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	c := newConn(New(Config{}, &doneBackend{}), a, 1)
	send := func(n int) {
		go b.Write(make([]byte, n))
	}
	// pass reads once, as serve does, and consumes all it read, as a pass
	// that executes every command does; it returns the bytes read and the
	// buffer's size during the read.
	pass := func() (read, size int) {
		t.Helper()
		c.fill()
		if c.readErr != nil {
			t.Fatal(c.readErr)
		}
		read, size = c.inLen, len(c.in)
		c.consume(c.inLen)
		return read, size
	}

	send(16<<10 + 32<<10 + 64<<10 + 100<<10)
	for _, want := range [][2]int{{16 << 10, 16 << 10}, {32 << 10, 32 << 10}, {64 << 10, 64 << 10}, {100 << 10, 128 << 10}} {
		if read, size := pass(); read != want[0] || size != want[1] {
			t.Fatalf("read %d bytes into a buffer of %d, want %d into %d", read, size, want[0], want[1])
		}
	}
	if len(c.in) != 128<<10 {
		t.Fatalf("after a pass used 100 KiB of 128 KiB, the buffer holds %d bytes, want it kept", len(c.in))
	}

	send(1 << 10)
	if read, size := pass(); read != 1<<10 || size != 128<<10 {
		t.Fatalf("read %d bytes into a buffer of %d, want 1 KiB into 128 KiB", read, size)
	}
	if len(c.in) != inInitial {
		t.Fatalf("after a pass used 1 KiB of 128 KiB, the buffer holds %d bytes, want %d", len(c.in), inInitial)
	}

	send(2 << 20) // the buffer grows to readAhead, no further
	for total, most := 0, 0; total < 2<<20; {
		read, size := pass()
		total, most = total+read, max(most, size)
		if size > readAhead || (total == 2<<20 && most != readAhead) {
			t.Fatalf("the buffer grew to %d bytes reading 2 MiB, want readAhead, %d", most, readAhead)
		}
	}
}
