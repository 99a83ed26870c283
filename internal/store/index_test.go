package store

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"unsafe"
)

// TestIndexRunsStayFew adds distinct keys in random order and checks after
// each seal that the runs are sorted, hold each key once, and each is more
// than twice the size of the next newer one (but for the runs up to the two
// a pending merge is merging, which wait for it), so that there are
// O(log n).
func TestIndexRunsStayFew(t *testing.T) {
	const n, fresh = 20_000, 8
	x := newIndex(fresh)
	pendings := 0
	for i, k := range rand.Perm(n) {
		key := fmt.Sprint(k)
		x.add(itemOf(&cell{key: key}))
		if len(x.fresh) > 0 {
			continue
		}
		waiting := 0 // runs before this one may not be merged yet
		if x.pending != nil {
			waiting = x.pending.at + 1
			pendings++
		}
		for j, r := range x.runs {
			for m := 1; m < len(r); m++ {
				if compareItems(r[m-1], r[m]) >= 0 {
					t.Fatalf("after %d adds, run %d is out of order at %d: %q then %q", i+1, j, m, r[m-1].c.key, r[m].c.key)
				}
			}
			if j > waiting && len(x.runs[j-1]) <= 2*len(r) {
				t.Fatalf("after %d adds, run %d has %d items and run %d, older, %d", i+1, j, len(r), j-1, len(x.runs[j-1]))
			}
		}
		if limit := bits.Len(uint(i+1)/fresh) + 2; len(x.runs) > limit {
			t.Fatalf("after %d adds, %d runs; want at most %d", i+1, len(x.runs), limit)
		}
		if (i+1)%2000 == 0 {
			checkKeys(t, &x, i+1)
		}
	}
	if pendings == 0 {
		t.Fatalf("no merge was left pending: the test does not exercise incremental merges")
	}
}

// checkKeys checks that a view of x holds n keys, in order.
func checkKeys(t *testing.T, x *index, n int) {
	t.Helper()
	m := newMerge([][]run{x.view()}, "", "", true)
	got, last := 0, ""
	for it, ok := m.next(); ok; it, ok = m.next() {
		if got > 0 && it.c.key <= last {
			t.Fatalf("view yields %q after %q", it.c.key, last)
		}
		got, last = got+1, it.c.key
	}
	if got != n {
		t.Fatalf("view holds %d keys, want %d", got, n)
	}
}

// TestDeletedValuesAreFreed deletes every key of a store after a snapshot,
// which makes each delete a tombstone in the index, and checks that the
// values are then freed: the index must not hold the shadowed cells, and
// their values, for long.
func TestDeletedValuesAreFreed(t *testing.T) {
	const keys, size = 200, 64 << 10 // 12.5 MiB of values
	s := New(Options{Stripes: 1})
	for i := range keys {
		s.Put(fmt.Appendf(nil, "k%03d", i), make([]byte, size))
	}
	s.Snapshot() // dropped at once; but every cell is now one a view may hold
	for i := range keys {
		s.Apply(AppendEntry(nil, OpDel, 0, fmt.Appendf(nil, "k%03d", i)))
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if s.Len() != 0 || ms.HeapAlloc > 4<<20 {
		t.Fatalf("after deleting all %d values of %d KiB, %d keys and a heap of %d KiB", keys, size>>10, s.Len(), ms.HeapAlloc>>10)
	}
	runtime.KeepAlive(s)
}

// TestRangeNAfterEachWrite alternates writes and short ranges, each range
// sealing the one item written since the last: the runs they leave must be
// merged, not piled up for every later range to merge, and each must cost
// its size, not a buffer of the fresh's capacity.
func TestRangeNAfterEachWrite(t *testing.T) {
	s := New(Options{Stripes: 16})
	for i := range 10_000 {
		s.Put(fmt.Appendf(nil, "k%06d", i), []byte("v"))
	}
	var dst []Pair
	var before, after runtime.MemStats
	const n = 2000
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range n {
		mustApply(t, s, AppendEntry(nil, OpSet, 0, fmt.Appendf(nil, "n%06d", i), []byte("v")))
		dst = s.RangeN([]byte("k"), []byte("l"), 10, dst[:0])
	}
	runtime.ReadMemStats(&after)
	per := (after.TotalAlloc - before.TotalAlloc) / n
	most := 0
	for i := range s.stripes {
		most = max(most, len(s.stripes[i].mu.idx.runs))
	}
	if per > 8<<10 || most > 8 {
		t.Errorf("a SET and a RangeN of 10 allocate %d bytes; a stripe has %d runs", per, most)
	}
}

// TestSealedRunsKeepNoBuffer checks that a run sealed from a few items does
// not keep the fresh buffer's whole array alive.
func TestSealedRunsKeepNoBuffer(t *testing.T) {
	s := New(Options{Stripes: 16})
	for i := range 16 * 30 {
		mustApply(t, s, AppendEntry(nil, OpSet, 0, fmt.Appendf(nil, "n%06d", i), []byte("v")))
		s.RangeN([]byte("a"), []byte("b"), 1, nil)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if ms.HeapAlloc > 2<<20 {
		t.Errorf("heap of %d KiB for a store of %d keys with one-byte values", ms.HeapAlloc>>10, s.Len())
	}
	runtime.KeepAlive(s)
}

// TestCompactAllMergesOnce checks that merging two runs whole copies them
// once: a merge into the oldest run drops absent items already.
func TestCompactAllMergesOnce(t *testing.T) {
	var a, b run
	for i := range 1000 {
		k := fmt.Sprintf("a%04d", i)
		a = append(a, itemOf(&cell{key: k}))
		k = fmt.Sprintf("b%04d", i)
		b = append(b, itemOf(&cell{key: k}))
	}
	allocs := testing.AllocsPerRun(10, func() {
		x := index{runs: []run{a, b}, limit: 8} // one allocation: the runs slice
		x.compactAll()
	})
	if allocs > 2 {
		t.Errorf("compactAll of two runs: %v allocations, want 2 (the runs slice and one merged run)", allocs)
	}
}

// TestPendingMergeFinishes checks that a pending merge ends only by being
// installed: a merge started over it would throw its work away, and,
// started again and again, leave ever more runs.
func TestPendingMergeFinishes(t *testing.T) {
	const n, fresh = 200_000, 8
	x := newIndex(fresh)
	for i, k := range rand.Perm(n) {
		key := fmt.Sprint(k)
		p := x.pending
		x.add(itemOf(&cell{key: key}))
		if p != nil && x.pending != p && p.at+1 < len(x.runs) && &x.runs[p.at][0] == &p.older[0] && len(x.runs[p.at]) == len(p.older) {
			t.Fatalf("add %d: the pending merge of runs %d and %d (%d+%d items, %d merged) gave way to one at %d",
				i, p.at, p.at+1, len(p.older), len(p.newer), p.i+p.j, x.pending.at)
		}
	}
}

// TestRunsStayFewLarge is TestIndexRunsStayFew's bound on the number of
// runs, loosened for pending merges, for an index large enough that the runs
// added while a merge is pending need a large merge themselves.
func TestRunsStayFewLarge(t *testing.T) {
	const n, fresh = 400_000, 8
	x := newIndex(fresh)
	for i, k := range rand.Perm(n) {
		key := fmt.Sprint(k)
		x.add(itemOf(&cell{key: key}))
		if limit := 2*bits.Len(uint(i+1)/fresh) + 2; len(x.runs) > limit {
			var sizes []int
			for _, r := range x.runs {
				sizes = append(sizes, len(r))
			}
			t.Fatalf("after %d adds, %d runs; want at most %d: %v", i+1, len(x.runs), limit, sizes)
		}
	}
}

// TestRangeNAfterEachWriteInOneStripe reads after every write in a store of
// one stripe, so that fresh never fills and only the reads seal it: the runs
// of about fresh's size that they leave, too large for a read to merge under
// every stripe's lock, must be merged by the writes that follow.
func TestRangeNAfterEachWriteInOneStripe(t *testing.T) {
	s := New(Options{Stripes: 1})
	most := 0
	for i := range 40 * defaultFresh {
		mustApply(t, s, AppendEntry(nil, OpSet, 0, fmt.Appendf(nil, "n%06d", i), []byte("v")))
		s.RangeN([]byte("a"), []byte("b"), 1, nil)
		most = max(most, len(s.stripes[0].mu.idx.runs))
	}
	if most > 12 {
		t.Errorf("%d keys, a RangeN after each write: up to %d runs", s.Len(), most)
	}
}

// TestSpares adds keys, taking views now and then, and checks after each add
// that the spare arrays are empty and cleared, within maxSpare, and shared
// with no run of the index or of its pending merge and no run any view was
// given; and that seals and merges did reuse them.
func TestSpares(t *testing.T) {
	const n, fresh = 50_000, 8
	rng := rand.New(rand.NewPCG(1, 2))
	x := newIndex(fresh)
	viewed := map[*item]bool{} // the arrays of every view's runs
	reused := 0
	for i, k := range rng.Perm(n) {
		before := map[*item]bool{}
		for _, r := range x.spare {
			before[unsafe.SliceData(r)] = true
		}
		key := fmt.Sprint(k)
		x.add(itemOf(&cell{key: key}))
		if rng.IntN(500) == 0 {
			for _, r := range x.view() {
				viewed[unsafe.SliceData(r)] = true
			}
		}
		held := map[*item]bool{}
		for _, r := range x.runs {
			held[unsafe.SliceData(r)] = true
		}
		if m := x.pending; m != nil {
			held[unsafe.SliceData(m.out)], held[unsafe.SliceData(m.older)], held[unsafe.SliceData(m.newer)] = true, true, true
		}
		for p := range held {
			if before[p] {
				reused++
			}
		}
		total := 0
		for j, r := range x.spare {
			p := unsafe.SliceData(r)
			switch {
			case len(r) != 0 || cap(r) == 0:
				t.Fatalf("add %d: spare %d has length %d, capacity %d", i, j, len(r), cap(r))
			case held[p]:
				t.Fatalf("add %d: spare %d is the array of a run in use", i, j)
			case viewed[p]:
				t.Fatalf("add %d: spare %d is the array of a run a view holds", i, j)
			}
			for _, it := range r[:cap(r)] {
				if it != (item{}) {
					t.Fatalf("add %d: spare %d holds item %v", i, j, it)
				}
			}
			total += cap(r)
		}
		if total != x.spared || total > x.maxSpare() {
			t.Fatalf("add %d: spares hold %d items, counted %d, most %d", i, total, x.spared, x.maxSpare())
		}
	}
	checkKeys(t, &x, n)
	if reused == 0 {
		t.Fatal("no spare was reused")
	}
	t.Logf("%d runs made from spares", reused)
}

// TestCompareItems checks that items order as their keys do, for keys
// that pre alone cannot tell apart: equal but for zero padding, and on
// either side of shortKey.
func TestCompareItems(t *testing.T) {
	sixteen := "sixteen bytes..."
	keys := []string{"", "\x00", "\x00\x00", "a", "a\x00", "a\x00\x00", "ab", "b",
		sixteen[:15], sixteen[:15] + "\x00", sixteen, sixteen + "\x00", sixteen + "\x00\x00",
		sixteen + "a", sixteen + "a\x00", sixteen + "b", strings.Repeat("\x00", 16), strings.Repeat("\x00", 17)}
	for _, a := range keys {
		for _, b := range keys {
			if got, want := compareItems(itemOf(&cell{key: a}), itemOf(&cell{key: b})), strings.Compare(a, b); got != want {
				t.Errorf("compareItems(%q, %q) = %d, want %d", a, b, got, want)
			}
		}
	}
}
