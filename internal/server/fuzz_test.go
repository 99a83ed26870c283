package server

import (
	"slices"
	"testing"

	"github.com/flintkv/flint/internal/protocol"
	"github.com/flintkv/flint/internal/store"
)

// FuzzPrefetchAhead looks ahead over arbitrary bytes, as execBuffered does
// over its input. It must not panic, nor keep slices of the input in its
// scratch, and where it says it stopped must be where a command parsed by
// the connection's own parser ends, or the end of the input: execBuffered
// looks again once it has run the commands before that point, and never at
// a command it has not reached.
func FuzzPrefetchAhead(f *testing.F) {
	f.Add([]byte(respCommand("GET", "a") + respCommand("MGET", "a", "b") + respCommand("SET", "a", "b") + respCommand("GET", "a")))
	f.Add([]byte("GET a\r\nmget a b\r\n*2\r\n$3\r\nGET\r\n$1\r\n"))
	f.Add([]byte("*70\r\n$3\r\nGET\r\n" + respCommand("GET", "a")))
	f.Add([]byte(respCommand("GET", "a") + "*2\r\n$x\r\n"))
	c := testConn(f, Local{S: store.New(store.Options{})})
	f.Fuzz(func(t *testing.T, in []byte) {
		n := c.prefetchAhead(in)
		if n < 0 || n > len(in) {
			t.Fatalf("prefetchAhead(%q) = %d, outside the input", in, n)
		}
		for _, s := range [][][]byte{c.aheadArgs[:cap(c.aheadArgs)], c.prefetch[:cap(c.prefetch)]} {
			if slices.ContainsFunc(s, func(b []byte) bool { return b != nil }) {
				t.Fatalf("prefetchAhead(%q) kept a slice of its input", in)
			}
		}
		if n == len(in) {
			return
		}
		p := protocol.NewParser(c.srv.lim)
		for off := 0; off < n; {
			_, m, err := p.Next(in[off:], nil)
			if err != nil {
				t.Fatalf("prefetchAhead(%q) = %d, past the command at %d that does not parse: %v", in, n, off, err)
			}
			if off += m; off > n {
				t.Fatalf("prefetchAhead(%q) = %d, inside the command that ends at %d", in, n, off)
			}
		}
	})
}
