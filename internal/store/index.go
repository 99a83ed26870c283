package store

import (
	"math"
	"slices"
)

// index is one shard's ordered index: an item for every key, in a
// log-structured merge tree held in memory.
//
// A write that adds a key, gives a key a new cell, or deletes a key whose
// cell a view may hold (a tombstone: an item with no cell) appends an item
// to fresh, in no order, without searching anything. When fresh fills, it is
// sorted into a run. A run is sorted by key, holds each key once and never
// changes once made; an item in a newer run shadows the same key's items in
// older runs. Whenever a run is not more than twice the size of the next
// newer one, the two are merged, dropping the items shadowed (and the
// tombstones, when no older run remains for them to shadow; the items of
// deleted cells wait for a merge of all runs, see shard.shadowLocked). So each run
// is more than twice the size of the next, there are O(log n) runs, and an
// item is copied O(log n) times in its life, in sequential passes, where a
// B-tree would search for every new key at its place in a large tree.
//
// Ordered reads see the runs alone: a view seals fresh into a run first. The
// runs a view holds never change, so it stays valid however the index
// changes after it; the cells its items point to do not change either (see
// cell).
type index struct {
	fresh []item // newest last
	runs  []run  // oldest first
	limit int    // fresh is sealed once it holds this many items
}

// run is a slice of items sorted by key, each key at most once.
type run []item

// Sizes of an index: fresh's capacity, by default, and the most runs before
// a write merges them even if fresh is not full (views seal fresh without
// merging, so that taking one stays cheap).
const (
	defaultFresh = 512
	maxRuns      = 32
)

// deadGen marks a deleted cell: see absent.
const deadGen = math.MaxUint64

// absent reports whether it says that its key has no value: a tombstone, or
// an item whose cell was deleted. Either shadows older items of its key.
func (it item) absent() bool { return it.c == nil || it.c.gen == deadGen }

func newIndex(limit int) index { return index{fresh: make([]item, 0, limit), limit: limit} }

// add appends it, the newest item of its key.
func (x *index) add(it item) {
	x.fresh = append(x.fresh, it)
	if len(x.fresh) >= x.limit || len(x.runs) > maxRuns {
		x.seal()
		x.compact(false)
	}
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
	out := r[:0]
	for i, it := range r {
		if i == 0 || it.pre != r[i-1].pre || it.key != r[i-1].key { // pre first: no key read
			out = append(out, it)
		}
	}
	clear(r[len(out):]) // no references to cells from beyond the run's length
	x.runs = append(x.runs, run(out[:len(out):len(out)]))
	x.fresh = make([]item, 0, x.limit)
}

// compact merges the newest runs while one is not more than twice the size
// of the next newer one, or, if all, until one run remains, which then holds
// no absent item.
func (x *index) compact(all bool) {
	drop := dropTombstones
	if all {
		drop = dropAbsent
	}
	for n := len(x.runs); n >= 2 && (all || len(x.runs[n-2]) <= 2*len(x.runs[n-1])); n-- {
		x.runs[n-2] = mergeRuns(x.runs[n-2], x.runs[n-1], n == 2, drop)
		x.runs[n-1] = nil
		x.runs = x.runs[:n-1]
	}
	if all && len(x.runs) == 1 {
		x.runs[0] = mergeRuns(x.runs[0], nil, true, drop) // the absent items a lone run may hold
	}
}

// What a merge into the oldest run drops: tombstones only, which it can
// tell without reading the items' cells, or every absent item, which reads
// each cell (a cache miss, for most of them).
const (
	dropTombstones = iota
	dropAbsent
)

// mergeRuns returns the run of the items of older and newer, newer's
// shadowing older's, and, if bottom (no older run remains for them to
// shadow), without the absent items that drop says.
func mergeRuns(older, newer run, bottom bool, drop int) run {
	out := make(run, 0, len(older)+len(newer))
	keep := func(it item) {
		if !bottom || it.c != nil && (drop == dropTombstones || it.c.gen != deadGen) {
			out = append(out, it)
		}
	}
	i, j := 0, 0
	for i < len(older) && j < len(newer) {
		switch c := compareItems(older[i], newer[j]); {
		case c < 0:
			keep(older[i])
			i++
		case c > 0:
			keep(newer[j])
			j++
		default:
			keep(newer[j])
			i++
			j++
		}
	}
	for _, it := range older[i:] {
		keep(it)
	}
	for _, it := range newer[j:] {
		keep(it)
	}
	return out
}

// compactAll merges every run into one, dropping every shadowed and absent
// item.
func (x *index) compactAll() {
	x.seal()
	x.compact(true)
}

// view seals fresh and returns the runs, oldest first, which the caller must
// not modify.
func (x *index) view() []run {
	x.seal()
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
