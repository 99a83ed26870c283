package frame

import (
	"fmt"
	"reflect"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// TestAheadMatchesScanner reads files of many batches, ending cleanly, in
// zeros, or in damage, with Ahead and with a Scanner: both return the same
// frames and the same end, and progress sees every frame's offset.
func TestAheadMatchesScanner(t *testing.T) {
	var good []byte
	for i := range 3*aheadBatch + 5 {
		good = Append(good, byte(i%7+1), fmt.Appendf(nil, "payload %d", i))
	}
	damaged := append([]byte(nil), good...)
	damaged[len(damaged)/2] ^= 1
	for name, b := range map[string][]byte{
		"clean end":        good,
		"zeros":            append(append([]byte(nil), good...), make([]byte, 64)...),
		"damage":           damaged,
		"torn":             good[:len(good)-3],
		"empty":            nil,
		"one batch":        good[:Size(len("payload 0"))*aheadBatch],
		"damage at offset": append([]byte{1}, good...),
	} {
		t.Run(name, func(t *testing.T) {
			want := scanAll(NewScanner(b))
			var last atomic.Int64
			last.Store(-1)
			a := NewAhead(b, func(off int64) {
				if off <= last.Load() {
					t.Errorf("progress went from %d to %d", last.Load(), off)
				}
				last.Store(off)
			})
			defer a.Close()
			var got []Frame
			for {
				c := a.Next()
				got = append(got, c)
				if c.Err != nil {
					break
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("Ahead read %d frames ending in %v, the scanner %d ending in %v", len(got), got[len(got)-1].Err, len(want), want[len(want)-1].Err)
			}
			if end := got[len(got)-1].Offset; last.Load() != end {
				t.Fatalf("last progress %d, want the offset of the end, %d", last.Load(), end)
			}
			if again := a.Next(); again.Offset != got[len(got)-1].Offset || again.Err != got[len(got)-1].Err {
				t.Fatalf("Next after the end returned offset %d, %v", again.Offset, again.Err)
			}
		})
	}
}

// scanAll reads every frame with s, and the error that ends them.
func scanAll(s *Scanner) []Frame {
	var out []Frame
	for {
		c := Frame{Offset: s.Offset()}
		c.Type, c.Payload, c.Err = s.Next()
		out = append(out, c)
		if c.Err != nil {
			return out
		}
	}
}

// TestAheadBoundedAndClosed: Ahead checks at most its batches ahead of a
// reader that stops, and Close ends its goroutine.
func TestAheadBoundedAndClosed(t *testing.T) {
	var b []byte
	for range 10 * aheadBatch {
		b = Append(b, 1, []byte("x"))
	}
	before := runtime.NumGoroutine()
	var reached atomic.Int64
	a := NewAhead(b, func(off int64) { reached.Store(off) })
	a.Next()
	time.Sleep(20 * time.Millisecond)
	if most := int64(Size(1) * (aheadBatches + 1) * aheadBatch); reached.Load() > most {
		t.Fatalf("with the reader at its first frame, Ahead reached offset %d, want at most %d", reached.Load(), most)
	}
	a.Close()
	for deadline := time.Now().Add(10 * time.Second); runtime.NumGoroutine() > before; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after Close, %d before NewAhead", runtime.NumGoroutine(), before)
		}
	}
}
