package store

// Snapshot is a consistent read-only view of the store at one instant. It
// holds views of the stripes' indexes, whose runs never change: taking one
// costs sorting each index's few newest items under the locks, and nothing
// after. A Snapshot may be read from any goroutine, for as long as needed.
type Snapshot struct {
	views [][]run
	n     int             // number of pairs, the expired ones included
	gone  map[string]bool // the keys that had expired but were not removed yet
}

// Snapshot returns a view of the store as it is now.
func (s *Store) Snapshot() *Snapshot {
	views, n, gone := s.views(true)
	return &Snapshot{views: views, n: n, gone: gone}
}

// SnapshotAll is Snapshot for a snapshot file, which Ascend writes whole:
// it does not gather the expired keys that Range skips, which costs, under
// every stripe's lock, O(those not removed yet), and its Range skips none.
func (s *Store) SnapshotAll() *Snapshot {
	views, n, _ := s.views(false)
	return &Snapshot{views: views, n: n}
}

// Count returns how many pairs have start <= key <= end, at most limit when
// limit > 0.
func (sn *Snapshot) Count(start, end []byte, limit int) int {
	n := 0
	sn.Range(start, end, limit, func(string, []byte) bool { n++; return true })
	return n
}

// Range calls fn for each pair with start <= key <= end in byte order, at
// most limit pairs when limit > 0, until fn returns false. It skips the
// keys that had expired when the snapshot was taken. Values must not be
// modified.
func (sn *Snapshot) Range(start, end []byte, limit int, fn func(key string, val []byte) bool) {
	if string(start) > string(end) {
		return
	}
	m := newMerge(sn.views, string(start), string(end), false)
	for n := 0; limit <= 0 || n < limit; {
		it, ok := m.next()
		if !ok {
			return
		}
		if sn.gone[it.c.key] {
			continue
		}
		if !fn(it.c.key, it.c.val) {
			return
		}
		n++
	}
}

// Len returns the number of pairs in the snapshot, those of expired keys
// not yet removed included (as Ascend yields them).
func (sn *Snapshot) Len() int { return sn.n }

// Ascend calls fn for every pair in key order until fn returns false. It
// yields every stored pair, those of keys that have expired but are not
// removed yet included, for a snapshot file: with the deadlines
// (Store.Deadlines), taken at the same instant, a store loaded from it
// judges them expired as this one does.
func (sn *Snapshot) Ascend(fn func(key string, val []byte) bool) {
	m := newMerge(sn.views, "", "", true)
	for {
		it, ok := m.next()
		if !ok || !fn(it.c.key, it.c.val) {
			return
		}
	}
}

// AscendLive is Ascend without the keys that had expired when the
// snapshot was taken: the keys a client sees (KEYS).
func (sn *Snapshot) AscendLive(fn func(key string, val []byte) bool) {
	sn.Ascend(func(key string, val []byte) bool { return sn.gone[key] || fn(key, val) })
}

// Reserve sizes the tables of empty stripes for a store of n keys, spread
// over the stripes as keys hash, so that loading them splits no segment
// (each split allocates one, and a directory doubling a directory). It is
// a hint, for an empty store about to load a snapshot.
func (s *Store) Reserve(n int) {
	per := n/len(s.stripes) + n/len(s.stripes)/16 + 16 // hashing spreads keys within a few percent
	for i := range s.stripes {
		st := &s.stripes[i]
		st.mu.Lock()
		if st.keys.Load() == 0 {
			st.mu.m = newTable(per)
		}
		st.mu.Unlock()
	}
}

// Put stores val under key, replacing any value. It is how a store is
// rebuilt from a snapshot file; commands go through Apply. Put keeps val
// itself, not a copy, so that loading copies no value: the caller must
// never modify val afterwards. val may share memory with other values; its
// capacity is cut to its length so that APPEND never writes past it.
func (s *Store) Put(key, val []byte) {
	st, h := s.locate(key)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.putLocked(h, key, val[:len(val):len(val)])
}
