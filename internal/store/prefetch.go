package store

import "runtime"

// PrefetchKeys is how many keys a prefetch looks up at most. In a store
// much larger than the CPU's caches, a key's table slot and cell are usually
// in none of them: served one after another, each write or read waits for
// its own misses, where lookups made back to back, whose loads do not
// depend on each other, overlap them. 64 keys' slots and cells fit in a
// core's L1 cache with room to spare.
const PrefetchKeys = 64

// Prefetch loads into the calling core's cache the table slots and cells of
// the first PrefetchKeys of keys, and the values of the first valued of
// them that are at most maxValue bytes long, so that reading them next, one
// after another, finds them there. It is only a hint and changes nothing:
// what it does not load costs its misses when it is used, as without it.
// It loads nothing for a single key (there are no misses to overlap), nor
// for keys past the first PrefetchKeys or in a stripe's clash map, nor the
// keys longer than shortKey; of a value, only the lines of its first and
// last bytes (all of a value up to 65 bytes). A value may be in a mapped
// file: loading it may read the disk.
func (s *Store) Prefetch(keys [][]byte, valued, maxValue int) {
	if len(keys) < 2 {
		return // no misses to overlap
	}
	var hashes [PrefetchKeys]uint64
	n := min(len(keys), len(hashes))
	for i, k := range keys[:n] {
		hashes[i] = s.hash(k)
	}
	s.prefetchHashes(hashes[:n], min(valued, n), maxValue)
}

// prefetch decodes into ents the first entries of batch, the first of
// them entry number i of its batch: as many whole entries as hold
// PrefetchKeys keys in all, and at least one (and no more than fit in
// ents). It loads the table slots and cells of their keys (of an entry with
// more, the first PrefetchKeys), and returns the decoded entries, whose
// args alias batch and args (or memory of their own once args is full), and
// the rest of batch; or an error wrapping ErrBadEntry if an entry it decodes
// is malformed, or follows an OpSeq that cannot wrap it, as CheckBatch
// would.
func (s *Store) prefetch(batch []byte, i int, ents *[PrefetchKeys]entry, args [][]byte) ([]entry, []byte, error) {
	var hashes [PrefetchKeys]uint64
	n, m := 0, 0
	for len(batch) > 0 && m < len(ents) {
		e, rest, err := nextEntry(batch, i+m, args[len(args):])
		if err == nil && m > 0 {
			err = checkWrap(ents[m-1].op, e.op, i+m)
		}
		if err != nil {
			return nil, nil, err
		}
		keys, stride := e.keys()
		if m > 0 && n+(len(keys)+stride-1)/stride > len(hashes) {
			break
		}
		for j := 0; j < len(keys) && n < len(hashes); j += stride {
			hashes[n] = s.hash(keys[j])
			n++
		}
		if cap(args)-len(args) >= len(e.args) { // e.args is in args
			args = args[:len(args)+len(e.args)]
		}
		ents[m] = e
		m++
		batch = rest
	}
	s.prefetchHashes(hashes[:n], 0, 0)
	return ents[:m], batch, nil
}

// prefetchHashes loads the table slots and cells of the keys with these
// hashes, and the values of the first valued of them, of at most maxValue
// bytes, as Prefetch describes: in passes, each of loads that do not
// depend on each other, so that each pass's misses overlap (see table).
// The home slots first, then the lookups, which find them in the cache
// (most end there), then the cells the lookups found, then the values the
// cells hold. Writes leave values out: most replace theirs without reading
// it.
//
// It read-locks the keys' stripes once, in ascending order as every
// multi-key command does, for all three passes that need the locks: a
// lock's two atomic operations a stripe rather than four a key (six for a
// key whose value it loads), on lock words that the other cores' reads and
// writes keep taking from this one's cache.
func (s *Store) prefetchHashes(hashes []uint64, valued, maxValue int) {
	if len(hashes) < 2 {
		return // no misses to overlap
	}
	var set [PrefetchKeys]int
	ls := s.lockSetOfHashes(hashes, set[:0])
	s.rlock(ls)
	var cells [PrefetchKeys]*cell
	sum := s.findCellsLocked(hashes, &cells)
	var vals [PrefetchKeys][]byte
	for i, c := range cells[:len(hashes)] {
		switch {
		case c == nil:
		case i < valued:
			vals[i] = c.val // a write replaces it under the lock
		default:
			sum += uint64(len(c.key))
		}
	}
	s.runlock(ls)
	for _, v := range vals[:valued] {
		if len(v) > 0 && len(v) <= maxValue { // a value's bytes never change: see append
			sum += uint64(v[0]) + uint64(v[len(v)-1])
		}
	}
	runtime.KeepAlive(sum)
}

// findCellsLocked loads the table slots of the keys with these hashes (at
// most PrefetchKeys), in one pass, then finds their cells (nil for a
// hash that has none), in another, so that each pass's misses overlap. It
// returns a sum of what it loaded, for the caller to keep alive. The
// caller holds the read locks of the keys' stripes.
func (s *Store) findCellsLocked(hashes []uint64, cells *[PrefetchKeys]*cell) uint64 {
	var sum uint64
	for _, h := range hashes {
		sum += s.stripes[h&s.mask].mu.m.touch(h)
	}
	for i, h := range hashes {
		cells[i] = s.stripes[h&s.mask].mu.m.get(h)
	}
	return sum
}
