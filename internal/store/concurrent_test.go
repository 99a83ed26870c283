package store

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// TestConcurrentAtomicity runs writers and readers on overlapping groups of
// keys, and prefetches among them; run it with -race. Every write changes
// a whole group at once (MSET or MSETNX of one value to all its keys, or
// DEL of all its keys), so a reader that sees a group at one instant,
// through MGET, Range or a Snapshot, must find it either empty or full
// with one value throughout.
func TestConcurrentAtomicity(t *testing.T) {
	const (
		groups  = 6
		width   = 5 // keys per group, spread over the stripes
		writers = 4
		readers = 4
		writes  = 1500 // per writer
	)
	s := New(Options{Stripes: 8, fresh: 4}) // merges runs while views are taken
	keys := make([][][]byte, groups)
	for g := range keys {
		for i := range width {
			keys[g] = append(keys[g], fmt.Appendf(nil, "g%d/k%d", g, i))
		}
	}

	var wg sync.WaitGroup
	var writing atomic.Int32
	writing.Store(writers)
	var reads atomic.Int64
	for w := range writers {
		wg.Go(func() {
			defer writing.Add(-1)
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for n := range writes {
				val := fmt.Sprintf("w%d.%d", w, n)
				g := rng.IntN(groups)
				var args [][]byte
				switch p := rng.IntN(10); {
				case p < 4: // MSET one group, keys in random order
					for _, i := range rng.Perm(width) {
						args = append(args, keys[g][i], []byte(val))
					}
					mustApply(t, s, AppendEntry(nil, OpMSet, 0, args...))
				case p < 6: // MSET two groups, overlapping others; as a batch
					for _, k := range append(keys[g], keys[(g+1)%groups]...) {
						args = append(args, k, []byte(val))
					}
					var b Batch
					b.Add(OpMSet, 0, args...)
					if err := s.ApplyBatch(b.Bytes(), nil); err != nil {
						t.Error(err)
					}
				case p < 8: // DEL one group, with a repeated key
					args = append(args, keys[g]...)
					mustApply(t, s, AppendEntry(nil, OpDel, 0, append(args, keys[g][0])...))
				default: // MSETNX: all or nothing
					for _, k := range keys[g] {
						args = append(args, k, []byte(val))
					}
					mustApply(t, s, AppendEntry(nil, OpMSetNX, 0, args...))
				}
			}
		})
	}
	for r := range readers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 2))
			// Read until the writers finish, and at least a little.
			for n := 0; writing.Load() > 0 || n < 50; n++ {
				reads.Add(1)
				g := rng.IntN(groups)
				switch rng.IntN(4) {
				case 0:
					var vals []string
					var found int
					s.Prefetch(keys[g], len(keys[g]), 1<<20) // a hint, which must change nothing
					s.MGet(keys[g], func(_ int, v []byte, ok bool) {
						if ok {
							found++
							vals = append(vals, string(v))
						}
					})
					checkGroup(t, "MGET", g, width, found, vals)
				case 1:
					var vals []string
					s.Range(fmt.Appendf(nil, "g%d/", g), fmt.Appendf(nil, "g%d/\xff", g), 0, func(_ string, v []byte) bool {
						vals = append(vals, string(v))
						return true
					})
					checkGroup(t, "Range", g, width, len(vals), vals)
				case 2:
					if n := s.Exists(keys[g]); n != 0 && n != width {
						t.Errorf("Exists on group %d = %d, want 0 or %d", g, n, width)
					}
				case 3:
					sn := s.Snapshot()
					byGroup := make([][]string, groups)
					sn.Ascend(func(k string, v []byte) bool {
						gi := int(k[1] - '0') // keys are "g<digit>/..."
						byGroup[gi] = append(byGroup[gi], string(v))
						return true
					})
					for gi, vals := range byGroup {
						checkGroup(t, "Snapshot", gi, width, len(vals), vals)
					}
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d reads during %d writes", reads.Load(), writers*writes)
	// The writes themselves are all accounted for.
	var want int64
	for g := range keys {
		if n := s.Exists(keys[g]); n == width {
			want += int64(width)
		}
	}
	if s.Len() != want {
		t.Errorf("Len = %d, want %d", s.Len(), want)
	}
}

func mustApply(t *testing.T, s *Store, e []byte) {
	if _, err := s.Apply(e); err != nil {
		t.Errorf("Apply: %v", err)
	}
}

// checkGroup checks one group of width keys as a reader saw it: found of
// them exist, with values vals.
func checkGroup(t *testing.T, how string, g, width, found int, vals []string) {
	if found != 0 && found != width {
		t.Errorf("%s saw %d of group %d's %d keys: a write was seen half done", how, found, g, width)
		return
	}
	for _, v := range vals {
		if v != vals[0] {
			t.Errorf("%s saw mixed values in group %d: %q", how, g, vals)
			return
		}
	}
}

// TestPrefetchWhileWriting prefetches keys, values included, while other
// goroutines append to them (which may fill a value's spare capacity in
// place), replace and delete them; run it with -race. Each key's value is
// only ever made of 'x's, and a read sees one whole.
func TestPrefetchWhileWriting(t *testing.T) {
	const (
		width  = 16 // keys, spread over the stripes
		writes = 3000
	)
	s := New(Options{Stripes: 4})
	var keys [][]byte
	for i := range width {
		keys = append(keys, fmt.Appendf(nil, "k%d", i))
	}
	var wg sync.WaitGroup
	var writing atomic.Bool
	writing.Store(true)
	wg.Go(func() {
		defer writing.Store(false)
		rng := rand.New(rand.NewPCG(1, 1))
		for range writes {
			k := keys[rng.IntN(width)]
			switch p := rng.IntN(20); {
			case p == 0:
				mustApply(t, s, AppendEntry(nil, OpDel, 0, k))
			case p == 1:
				mustApply(t, s, AppendEntry(nil, OpSet, 0, k, []byte("x")))
			default:
				mustApply(t, s, AppendEntry(nil, OpAppend, 0, k, []byte("xx")))
			}
		}
	})
	for range 2 {
		wg.Go(func() {
			for n := 0; writing.Load() || n < 50; n++ {
				s.Prefetch(keys, width/2, 1<<20) // values of the first half only
				for _, k := range keys {
					if v, ok := s.Get(k); ok && strings.Trim(string(v), "x") != "" {
						t.Errorf("GET %s = %q, want only x's", k, v)
					}
				}
			}
		})
	}
	wg.Wait()
}
