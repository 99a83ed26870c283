package store

import "runtime"

// Get returns the value of key. The returned slice is shared with the store
// and must not be modified.
func (s *Store) Get(key []byte) ([]byte, bool) {
	st, h := s.locate(key)
	now := s.nowMs()
	s.rlockStripe(st)
	c := st.visibleLocked(st.lookupLocked(h, key), key, now)
	v := c.value() // a write may replace it once the lock is released
	st.mu.RUnlock()
	return v, c != nil
}

// MGet calls fn with the value of each key, in order, all read at one
// instant. found is false for a missing key. Values must not be modified.
//
// Of more than PrefetchKeys keys, it looks up PrefetchKeys at a time, each
// group's table slots and cells loaded first (see findCellsLocked), so that
// their misses overlap. Fewer keys it looks up one after another: their
// caller can prefetch them (see Prefetch), as the server does for the reads
// it is about to run.
func (s *Store) MGet(keys [][]byte, fn func(i int, val []byte, found bool)) {
	if len(keys) == 1 {
		v, ok := s.Get(keys[0])
		fn(0, v, ok)
		return
	}
	vals := make([][]byte, len(keys))
	found := make([]bool, len(keys))
	ls := s.lockSetOf(keys, 1)
	now := s.nowMs()
	s.rlock(ls)
	if len(keys) > PrefetchKeys {
		s.mgetGroupsLocked(keys, vals, found, now)
	} else {
		for i, k := range keys {
			st, h := s.locate(k)
			c := st.visibleLocked(st.lookupLocked(h, k), k, now)
			vals[i], found[i] = c.value(), c != nil
		}
	}
	s.runlock(ls)
	for i := range keys {
		fn(i, vals[i], found[i])
	}
}

// mgetGroupsLocked reads the values of keys into vals and found,
// PrefetchKeys keys at a time: it finds a group's cells, then loads them
// all before it compares their keys, without looking the hashes up again.
// The caller holds the keys' stripes' read locks; keys that have expired
// by now (Unix ms) are not found.
func (s *Store) mgetGroupsLocked(keys, vals [][]byte, found []bool, now int64) {
	var hashes [PrefetchKeys]uint64
	var cells [PrefetchKeys]*cell
	var sum uint64
	for lo := 0; lo < len(keys); lo += PrefetchKeys {
		group := keys[lo:min(lo+PrefetchKeys, len(keys))]
		for i, k := range group {
			hashes[i] = s.hash(k)
		}
		sum += s.findCellsLocked(hashes[:len(group)], &cells)
		for _, c := range cells[:len(group)] {
			if c != nil {
				sum += uint64(len(c.key))
			}
		}
		for i, k := range group {
			st := &s.stripes[hashes[i]&s.mask]
			c := st.visibleLocked(st.matchLocked(cells[i], k), k, now)
			vals[lo+i], found[lo+i] = c.value(), c != nil
		}
	}
	runtime.KeepAlive(sum)
}

// Exists returns how many of keys exist, counting a repeated key each time.
func (s *Store) Exists(keys [][]byte) int64 {
	ls := s.lockSetOf(keys, 1)
	now := s.nowMs()
	s.rlock(ls)
	defer s.runlock(ls)
	var n int64
	for _, k := range keys {
		if st, h := s.locate(k); st.visibleLocked(st.lookupLocked(h, k), k, now) != nil {
			n++
		}
	}
	return n
}

// Pair is one key and its value. Val is shared with the store and must not
// be modified.
type Pair struct {
	Key string
	Val []byte
}

// RangeN appends to dst up to limit pairs with start <= key <= end in byte
// order, read at one instant, and returns it. It merges the live indexes
// under every stripe's lock (sealing each one's fresh items needs the write
// lock), which costs less than a Snapshot, whose cells later writes must
// then copy, but holds off readers and writers while it runs: use it for
// short ranges, Snapshot for long ones.
func (s *Store) RangeN(start, end []byte, limit int, dst []Pair) []Pair {
	if string(start) > string(end) || limit <= 0 {
		return dst
	}
	s.lockQuiet(s.every)
	defer s.unlock(s.every)
	views := make([][]run, len(s.stripes))
	for i := range s.stripes {
		idx := &s.stripes[i].mu.idx
		idx.tidy()
		views[i] = idx.runs
	}
	now := s.nowMs()
	due := s.anyDueLocked(now)
	m := newMerge(views, string(start), string(end), false)
	for n := 0; n < limit; {
		it, ok := m.next()
		if !ok {
			break
		}
		if due {
			if st, _ := s.locate([]byte(it.c.key)); st.expiredLocked([]byte(it.c.key), now) {
				continue
			}
		}
		dst = append(dst, Pair{it.c.key, it.c.val})
		n++
	}
	return dst
}

// Range calls fn for each pair with start <= key <= end in byte order, at
// most limit pairs when limit > 0, until fn returns false. The pairs come
// from one instant; no lock is held while fn runs, so fn may block.
func (s *Store) Range(start, end []byte, limit int, fn func(key string, val []byte) bool) {
	s.Snapshot().Range(start, end, limit, fn)
}
