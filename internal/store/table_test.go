package store

import (
	"math/rand/v2"
	"testing"
)

// checkTable fails t unless tb keeps the invariants of table, and holds
// exactly the entries of want.
func checkTable(t *testing.T, tb *table, want map[uint64]*cell) {
	t.Helper()
	if len(tb.dir) != 1<<tb.depth {
		t.Fatalf("directory of %d entries at depth %d", len(tb.dir), tb.depth)
	}
	seen := map[uint64]bool{}
	n := 0
	for i := 0; i < len(tb.dir); {
		s := tb.dir[i]
		span := 1 << (tb.depth - s.depth)
		if s.depth > tb.depth || i%span != 0 {
			t.Fatalf("segment of depth %d at directory entry %d of depth %d", s.depth, i, tb.depth)
		}
		for j := i; j < i+span; j++ {
			if tb.dir[j] != s {
				t.Fatalf("directory entries %d to %d should all be one segment; %d is not", i, i+span-1, j)
			}
		}
		entries := 0
		for k, sl := range s.slots {
			if sl.c == nil {
				continue
			}
			entries++
			if seen[sl.h] {
				t.Fatalf("hash %#x is in two slots", sl.h)
			}
			seen[sl.h] = true
			if tb.seg(sl.h) != s {
				t.Fatalf("hash %#x is in the segment of directory entry %d, not its own", sl.h, i)
			}
			for p := home(sl.h); p != uint64(k); p = (p + 1) & homeMask {
				if s.slots[p].c == nil {
					t.Fatalf("hash %#x at slot %d: its probe from %d crosses the empty slot %d", sl.h, k, home(sl.h), p)
				}
			}
			if want[sl.h] != sl.c {
				t.Fatalf("hash %#x holds %p, want %p", sl.h, sl.c, want[sl.h])
			}
		}
		if entries != s.n || entries > maxLoad {
			t.Fatalf("segment at entry %d holds %d entries, counts %d, may hold %d", i, entries, s.n, maxLoad)
		}
		n += entries
		i += span
	}
	if n != tb.n || n != len(want) {
		t.Fatalf("table holds %d entries, counts %d, want %d", n, tb.n, len(want))
	}
}

// TestTableModel runs random sets, deletes and lookups against a Go map.
// Its hashes are drawn from pools that make the table's hard cases common:
// long probe chains that wrap around a segment's end, and hashes that agree
// on their top bits, so that segments split again and again before they
// tell them apart.
func TestTableModel(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, seed>>32|1))
	chained := func() uint64 { // home 1020 to 1023, so that chains wrap
		return rng.Uint64()&^(homeMask<<homeShift) | uint64(1020+rng.IntN(4))<<homeShift
	}
	crowded := func() uint64 { // top 12 bits shared
		return 0xabc<<52 | rng.Uint64()>>12
	}
	var pool []uint64
	for range 3000 {
		pool = append(pool, rng.Uint64(), chained(), crowded())
	}
	tb := newTable(0)
	want := map[uint64]*cell{}
	for op := range 60_000 {
		h := pool[rng.IntN(len(pool))]
		switch rng.IntN(3) {
		case 0, 1:
			c := &cell{}
			tb.set(h, c)
			want[h] = c
		case 2:
			tb.del(h)
			delete(want, h)
		}
		if got := tb.get(h); got != want[h] {
			t.Fatalf("op %d: get(%#x) = %p after the op, want %p", op, h, got, want[h])
		}
		if op%5000 == 0 {
			checkTable(t, &tb, want)
		}
	}
	checkTable(t, &tb, want)
	for h := range want { // and empty it again
		tb.del(h)
		delete(want, h)
		if tb.get(h) != nil {
			t.Fatalf("hash %#x found after its delete", h)
		}
	}
	checkTable(t, &tb, want)
}

// TestTableDeleteWraps checks that deleting the head of a probe chain that
// wraps around the end of a segment moves the rest back into place.
func TestTableDeleteWraps(t *testing.T) {
	tb := newTable(0)
	want := map[uint64]*cell{}
	var hs []uint64
	for i := range 6 { // homes 1022, 1022, 1023, 0, 1022, 1: slots 1022, 1023, 0, 1, 2, 3
		home := []uint64{1022, 1022, 1023, 0, 1022, 1}[i]
		h := uint64(i+1)<<40 | home<<homeShift
		c := &cell{}
		tb.set(h, c)
		want[h] = c
		hs = append(hs, h)
	}
	checkTable(t, &tb, want)
	for _, h := range hs {
		tb.del(h)
		delete(want, h)
		checkTable(t, &tb, want)
	}
}

// TestTableReserved checks that a table made for n entries takes n
// uniform hashes without splitting a segment, as Store.Reserve promises,
// with n at the most a table of its size is made for: reserveLoad entries
// a segment on average.
func TestTableReserved(t *testing.T) {
	const n = 128 * reserveLoad
	tb := newTable(n)
	depth, segs := tb.depth, len(tb.dir)
	rng := rand.New(rand.NewPCG(1, 2))
	for range n {
		tb.set(rng.Uint64(), &cell{})
	}
	if tb.depth != depth || tb.n != n {
		t.Fatalf("a table made for %d entries (%d segments) grew from depth %d to %d to take them", n, segs, depth, tb.depth)
	}
}

// TestTableSizes checks that newTable makes room for its hint at
// reserveLoad entries a segment, and no more than twice that room,
// including hints just past a multiple of it, which rounding down would
// pack into too few segments.
func TestTableSizes(t *testing.T) {
	for _, hint := range []int{0, 1, reserveLoad - 1, reserveLoad, reserveLoad + 1, 2*reserveLoad - 1, 2 * reserveLoad, 3*reserveLoad - 1, 100_000} {
		tb := newTable(hint)
		if room := len(tb.dir) * reserveLoad; room < hint {
			t.Errorf("newTable(%d): %d segments, room for %d entries", hint, len(tb.dir), room)
		}
		if hint > 0 && len(tb.dir) > 1 && (len(tb.dir)/2)*reserveLoad >= hint {
			t.Errorf("newTable(%d): %d segments, where half as many would hold it", hint, len(tb.dir))
		}
		checkTable(t, &tb, map[uint64]*cell{})
	}
}

// del removes h, if it is there, as unbindLocked does for a key's cell.
func (t *table) del(h uint64) {
	if s, i := t.find(h); s.slots[i].c != nil {
		t.delAt(s, i)
	}
}
