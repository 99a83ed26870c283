package store

import "math/bits"

// table maps a stripe's 64-bit key hashes to their cells: the stripe's point
// index (see stripe). It is an open-addressed hash table, used instead of a
// Go map because of how a lookup reaches memory. In a store much larger than
// the caches, a lookup's first load usually misses; a Go map's lookup is a
// loop that branches on the control word it loads, so lookups made back to
// back overlap their misses little, where a table's slot address is
// computed from the hash alone: a pass that only loads the slots of the
// next keys (see touch and Store.prefetch) has their misses in flight
// together, as many as the processor allows, and the lookups that follow
// find their slots in the cache.
//
// The table is split into segments of segSlots slots (extendible hashing).
// The top depth bits of a hash index the directory, whose entry points to
// the segment for those bits; a segment serves a power-of-two-aligned run
// of entries, those whose index agrees on its own, smaller depth. A
// segment that would pass maxLoad entries splits in two by one more bit of
// the hash (doubling the directory first if its depth is the directory's),
// so the table grows a segment at a time: a split moves at most maxLoad
// entries, microseconds under the stripe's lock, where rehashing a whole
// table of a large stripe at once would stall its writes for milliseconds.
//
// Within a segment a hash's home slot is given by other bits of it
// (homeShift), and collisions probe linearly, wrapping within the segment.
// Deletion moves the later entries of a probe chain back into the hole
// rather than leaving a tombstone, so a lookup stops at the first empty
// slot.
//
// Invariants: every hash is in at most one slot, and slot.c is nil exactly
// for an empty slot; a segment holds at most maxLoad entries, so it always
// has an empty slot and every probe ends; an entry lies in the segment that
// the directory gives for its hash, at its home slot or after it with no
// empty slot between them (cyclically); segment.n counts its entries and
// table.n all of them.
//
// Splitting can only separate hashes that differ in their top bits: with
// hashes from maphash, the top bits of maxLoad hashes differ long before
// the directory gets large. A store's hashBits (tests only) keeps at most
// 2^hashBits distinct hashes, which must stay under maxLoad, so that no
// segment of such a store ever needs to split.
type table struct {
	dir   []*segment // 1 << depth entries
	depth uint
	n     int
}

// segment is a fixed-size run of slots, serving the hashes whose top depth
// bits are those of its directory entries' indexes. (With depth and n it
// is 16 bytes over 16 KiB, which the allocator's size classes round up to
// 18 KiB: 12% of the table's memory, kept for the lookup's single load of
// a slot from the directory's segment.)
type segment struct {
	depth uint
	n     int
	slots [segSlots]slot
}

type slot struct {
	h uint64
	c *cell // nil: the slot is empty
}

const (
	segSlots  = 1024                 // slots in a segment: 16 KiB
	maxLoad   = segSlots * 3 / 4     // entries a segment holds at most
	homeShift = 24                   // a home slot is bits homeShift up of the hash
	homeMask  = uint64(segSlots - 1) // of a slot index

	// reserveLoad is the most entries newTable plans for a segment, on
	// average. Uniform hashes put a segment's count within a few dozen of
	// its mean (the spread of a binomial: about 24 at 576), well under
	// maxLoad, so a table made for its hint takes it without splitting; and
	// as the segments are a power of two, they hold half to all of it, not
	// much less than a grown table's.
	reserveLoad = maxLoad * 3 / 4
)

// newTable returns a table sized for about hint entries: segments hold
// reserveLoad of them at most, on average, at that size.
func newTable(hint int) table {
	var depth uint
	if segs := (hint + reserveLoad - 1) / reserveLoad; segs > 1 {
		depth = uint(bits.Len(uint(segs - 1)))
	}
	t := table{dir: make([]*segment, 1<<depth), depth: depth}
	for i := range t.dir {
		t.dir[i] = &segment{depth: depth}
	}
	return t
}

// home returns the slot where h's probe starts.
func home(h uint64) uint64 { return h >> homeShift & homeMask }

// seg returns the segment for h. A shift by 64, at depth 0, gives 0.
func (t *table) seg(h uint64) *segment { return t.dir[h>>(64-t.depth)] }

// find returns h's segment and its slot there: the one that holds h, or
// else the empty one where h's probe ends.
func (t *table) find(h uint64) (*segment, uint64) {
	s := t.seg(h)
	i := home(h)
	for s.slots[i].c != nil && s.slots[i].h != h {
		i = (i + 1) & homeMask
	}
	return s, i
}

// get returns the cell of h, or nil.
func (t *table) get(h uint64) *cell {
	s, i := t.find(h)
	return s.slots[i].c
}

// touch loads h's home slot, and returns a word of it so that the load is
// not optimised away: see table.
func (t *table) touch(h uint64) uint64 { return t.seg(h).slots[home(h)].h }

// set makes c, which is not nil, the cell of h.
func (t *table) set(h uint64, c *cell) {
	s, i := t.find(h)
	t.setAt(s, i, h, c)
}

// setAt makes c, which is not nil, the cell of h, for which find returned
// s and i: so a caller that looked h up already does not probe again.
func (t *table) setAt(s *segment, i, h uint64, c *cell) {
	switch {
	case s.slots[i].c != nil:
		s.slots[i].c = c
	case s.n < maxLoad:
		s.slots[i] = slot{h, c}
		s.n++
		t.n++
	default:
		t.split(s, h)
		t.set(h, c)
	}
}

// delAt removes the entry in slot i of s, which find returned for its
// hash.
func (t *table) delAt(s *segment, i uint64) {
	// Close the hole at i: a later entry of the chain moves into it unless
	// its home lies cyclically after i, where a lookup would not pass i.
	for j := (i + 1) & homeMask; s.slots[j].c != nil; j = (j + 1) & homeMask {
		if (j-home(s.slots[j].h))&homeMask >= (j-i)&homeMask {
			s.slots[i] = s.slots[j]
			i = j
		}
	}
	s.slots[i] = slot{}
	s.n--
	t.n--
}

// split moves the entries of s, which h's entry falls in, whose next bit
// of the hash is 1 to a new segment, doubling the directory first if s's
// depth is its. Keeping s for the others halves what a split allocates.
func (t *table) split(s *segment, h uint64) {
	if s.depth == t.depth {
		dir := make([]*segment, 2*len(t.dir))
		for i, x := range t.dir {
			dir[2*i], dir[2*i+1] = x, x
		}
		t.dir, t.depth = dir, t.depth+1
	}
	// s's entries in the directory: the aligned run, of 1 << (t.depth -
	// s.depth) entries, that holds h's. Its second half is the new one's.
	span := 1 << (t.depth - s.depth)
	start := int(h>>(64-t.depth)) &^ (span - 1)
	bit := 63 - s.depth
	old := s.slots
	s.slots, s.n = [segSlots]slot{}, 0
	s.depth++
	hi := &segment{depth: s.depth}
	for _, sl := range old {
		if sl.c != nil {
			if sl.h>>bit&1 == 0 {
				s.put(sl)
			} else {
				hi.put(sl)
			}
		}
	}
	for i := start + span/2; i < start+span; i++ {
		t.dir[i] = hi
	}
}

// put adds sl, whose hash s does not hold, to s, which has room for it.
func (s *segment) put(sl slot) {
	i := home(sl.h)
	for s.slots[i].c != nil {
		i = (i + 1) & homeMask
	}
	s.slots[i] = sl
	s.n++
}
