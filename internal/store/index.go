package store

import (
	"math"
	"slices"
	"unsafe"
)

// index is one stripe's ordered index: an item for every key, in a
// log-structured merge tree held in memory.
//
// A write that adds a key, gives a key a new cell, or deletes a key whose
// cell a view may hold (a tombstone: an item whose cell holds only the key)
// appends an item to fresh, in no order, without searching anything. When
// fresh fills, it is sorted into a run. A run is sorted by key, holds each
// key once and never changes once made; an item in a newer run shadows the
// same key's items in older runs. Whenever a run is not more than twice the
// size of the next newer one, the two are merged (a large merge a slice per
// add, see incremental), dropping the items shadowed, and the tombstones
// when no older run remains for them to shadow; the items of deleted cells
// wait for a merge of all runs (see stripe.shadowLocked). So each run is more
// than twice the size of the next, there are O(log n) runs, and an item is
// copied O(log n) times in its life, in sequential passes, where a B-tree
// would search for every new key at its place in a large tree.
//
// Ordered reads see the runs alone: a view seals fresh into a run first (and
// merges small runs, see tidy). The runs a view holds never change, so it
// stays valid however the index changes after it; the cells its items point
// to do not change either (see cell).
type index struct {
	fresh   []item  // newest last
	runs    []run   // oldest first
	limit   int     // fresh is sealed once it holds this many items
	pending *merger // a merge of two runs, done a slice per add; nil if none
	skipped bool    // the last compact left a merge undone for being over its most
	spare   []run   // emptied arrays of runs merged away, for new runs to reuse
	spared  int     // their capacity in items, at most maxSpare
	viewed  map[*item]bool
}

// Merges would otherwise allocate most of what a store with many new keys
// allocates (each item is copied O(log n) times), and that garbage sets how
// often the collector runs. So the array of a run that a merge replaced is
// emptied and kept in spare, and the next merge or seal that fits it fills
// it instead of allocating. A view's runs are read with no lock for as long
// as the view lives: viewed holds the arrays of the runs any view was given
// (the address of their first item), which are never reused.
//
// maxSpare bounds spared: spares are memory kept beside the index's own, 32
// bytes an item (1 MiB a stripe with the default fresh, at most), to save
// allocating it again. Merges larger than that allocate, as they are rare.
func (x *index) maxSpare() int { return x.incremental() / 2 }

// run is a slice of items sorted by key, each key at most once.
type run []item

// Sizes of an index: fresh's capacity, by default; the most runs before a
// write merges them even if fresh is not full (views seal fresh and merge
// only small runs, so that taking one stays cheap); and the fewest items of
// a pending merge each add merges.
const (
	defaultFresh = 512
	maxRuns      = 32
	mergeStep    = 16
)

// deadGen marks a deleted cell: see absent.
const deadGen = math.MaxUint64

// absent reports whether it says that its key has no value: a tombstone, or
// an item whose cell was deleted. Either shadows older items of its key.
func (it item) absent() bool { return it.tomb || it.c.gen == deadGen }

func newIndex(limit int) index { return index{fresh: make([]item, 0, limit), limit: limit} }

// add appends it, the newest item of its key, moves a pending merge on, and
// does the merges a view left undone.
func (x *index) add(it item) {
	x.fresh = append(x.fresh, it)
	merge := x.skipped
	if x.pending != nil && x.pending.step(x.pending.rate) {
		x.install()
		merge = true
	}
	if len(x.fresh) >= x.limit || len(x.runs) > maxRuns {
		x.seal()
		merge = true
	}
	if merge {
		x.compact(false, math.MaxInt)
	}
}

// incremental is the size above which a merge is left pending rather than
// done at once: merging a stripe's largest runs copies all of its items, and
// would hold its lock for milliseconds. There is one pending merge at a
// time, and the runs added while it is pending wait for it, so it must be
// done before they need a large merge themselves: each add merges
// mergeStep of its items, or more if that would take over incremental/4
// adds (see compact).
func (x *index) incremental() int { return 64 * x.limit }

// install puts the result of the finished pending merge in place of the two
// runs it merged.
func (x *index) install() {
	m := x.pending
	x.runs[m.at] = m.out
	x.runs = slices.Delete(x.runs, m.at+1, m.at+2)
	x.pending = nil
	x.recycle(m.older)
	x.recycle(m.newer)
}

// seal sorts fresh into a new run, keeping one item per key: the one with a
// live cell if any, which is the newest (a key's item is added after its
// earlier cell was deleted), else one absent item, which shadows older runs
// as the newest would.
func (x *index) seal() {
	if len(x.fresh) == 0 {
		return
	}
	r := x.fresh
	slices.SortFunc(r, func(a, b item) int {
		if c := compareItems(a, b); c != 0 {
			return c
		}
		return compareBool(a.absent(), b.absent()) // the live item first
	})
	out := x.alloc(len(r))
	for i, it := range r {
		if i == 0 || compareItems(it, r[i-1]) != 0 {
			out = append(out, it)
		}
	}
	x.runs = append(x.runs, out)
	clear(r) // fresh's array is reused: no references to cells from it
	x.fresh = r[:0]
}

// compact merges the newest runs while one is not more than twice the size
// of the next newer one, or, if all, until one run remains, which then holds
// no absent item. Unless all, it does no merge of more than most items (and
// says so in skipped), and a merge of more than incremental items is left
// pending unless one already is: until it finishes, the runs it merges, and
// older ones, wait, and so do merges of more than incremental items above it.
func (x *index) compact(all bool, most int) {
	bottom := dropTombstones // what a merge into runs[0] drops
	if all {
		bottom = dropAbsent
		if x.pending != nil {
			x.pending.step(math.MaxInt)
			x.install()
		}
	}
	x.skipped = false
	lone := len(x.runs) == 1
	// From the newest pair down: a merge leaves the pairs above it as they
	// were, since the merged run is larger than its newer half.
	for k := len(x.runs) - 2; k >= 0; k-- {
		older, newer := x.runs[k], x.runs[k+1]
		switch {
		case x.pending != nil && k <= x.pending.at+1:
			return
		case !all && len(older) > 2*len(newer):
			continue
		case !all && len(older)+len(newer) > most:
			x.skipped = true
			return
		case !all && len(older)+len(newer) > x.incremental():
			if x.pending == nil {
				m := len(older) + len(newer)
				x.pending = newMerger(k, older, newer, dropAt(k, bottom), x.alloc(m))
				x.pending.rate = max(mergeStep, 4*m/x.incremental()+1) // done in incremental/4 adds
			}
			return
		}
		x.runs[k] = x.merge(older, newer, dropAt(k, bottom))
		x.runs = slices.Delete(x.runs, k+1, k+2)
	}
	if all && lone {
		x.runs[0] = x.merge(x.runs[0], nil, bottom) // the absent items it may hold
	}
}

// What a merge drops besides shadowed items: nothing, unless its result is
// the oldest run, which no absent item needs to shadow anything in; then
// tombstones, which it can tell without reading the items' cells, or every
// absent item, which reads each cell (a cache miss, for most of them).
const (
	dropNone = iota
	dropTombstones
	dropAbsent
)

// dropAt returns what a merge into runs[k] drops, bottom if k is 0.
func dropAt(k, bottom int) int {
	if k == 0 {
		return bottom
	}
	return dropNone
}

// merge returns the run of the items of older and newer, newer's
// shadowing older's, without the items that drop says, and recycles
// older's and newer's arrays.
func (x *index) merge(older, newer run, drop int) run {
	m := newMerger(0, older, newer, drop, x.alloc(len(older)+len(newer)))
	m.step(math.MaxInt)
	x.recycle(older)
	x.recycle(newer)
	return m.out
}

// alloc returns an empty run with room for n items: a spare array if one
// holds n without being over twice as large, else a new one.
func (x *index) alloc(n int) run {
	for i, r := range x.spare {
		if cap(r) >= n && cap(r) <= 2*n {
			x.spare = slices.Delete(x.spare, i, i+1)
			x.spared -= cap(r)
			return r
		}
	}
	return make(run, 0, n)
}

// recycle takes back the array of r, which a merge replaced, as a spare,
// unless a view may hold it or the spares would exceed maxSpare.
func (x *index) recycle(r run) {
	p := unsafe.SliceData(r)
	switch {
	case cap(r) == 0:
		return
	case x.viewed[p]:
		delete(x.viewed, p) // the index holds it no more: nor will it again
		return
	case x.spared+cap(r) > x.maxSpare():
		return
	}
	clear(r[:cap(r)]) // the collector must not keep what its items point to
	x.spare = append(x.spare, r[:0])
	x.spared += cap(r)
}

// merger merges two runs as index.merge does, a step at a time. A merge that
// drops dead items (dropAbsent) must be done in one step: a cell may die
// between steps.
type merger struct {
	at           int // older's place in the index's runs, newer's is next
	older, newer run
	out          run
	i, j         int // items of older and newer merged so far
	drop         int
	rate         int // items merged each add, for a pending merge
}

// newMerger returns a merger that merges into out, which must be empty
// and have room for older and newer.
func newMerger(at int, older, newer run, drop int, out run) *merger {
	return &merger{at: at, older: older, newer: newer, out: out, drop: drop}
}

// step merges up to n more items and reports whether the merge is done.
func (m *merger) step(n int) bool {
	for ; n > 0 && m.i < len(m.older) && m.j < len(m.newer); n-- {
		switch c := compareItems(m.older[m.i], m.newer[m.j]); {
		case c < 0:
			m.keep(m.older[m.i])
			m.i++
		case c > 0:
			m.keep(m.newer[m.j])
			m.j++
		default:
			m.keep(m.newer[m.j])
			m.i++
			m.j++
		}
	}
	for ; n > 0 && m.i < len(m.older); n-- {
		m.keep(m.older[m.i])
		m.i++
	}
	for ; n > 0 && m.j < len(m.newer); n-- {
		m.keep(m.newer[m.j])
		m.j++
	}
	return m.i == len(m.older) && m.j == len(m.newer)
}

func (m *merger) keep(it item) {
	switch {
	case m.drop == dropTombstones && it.tomb, m.drop == dropAbsent && it.absent():
		return
	}
	m.out = append(m.out, it)
}

// compactAll merges every run into one, dropping every shadowed and absent
// item.
func (x *index) compactAll() {
	x.seal()
	x.compact(true, math.MaxInt)
}

// tidy seals fresh for an ordered read, and merges the small runs that
// reads sealing few items at a time would otherwise pile up, but no more:
// the caller holds every stripe's lock.
func (x *index) tidy() {
	x.seal()
	x.compact(false, x.limit)
}

// view tidies x and returns the runs, oldest first, which the caller must
// not modify.
func (x *index) view() []run {
	x.tidy()
	if x.viewed == nil {
		x.viewed = make(map[*item]bool)
	}
	for _, r := range x.runs {
		if cap(r) > 0 {
			x.viewed[unsafe.SliceData(r)] = true
		}
	}
	return slices.Clone(x.runs)
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	default:
		return -1
	}
}
