package store

import (
	"cmp"
	"slices"
)

// Scan calls fn with the keys that come at or after cursor in the scan
// order, at least count of them unless the store runs out, and returns the
// cursor to pass next, 0 once every key has been visited: Redis's SCAN.
// A scan starts at cursor 0.
//
// The scan order is that of the keys' hashes (the stripe's table's keys):
// stripe by stripe, and within a stripe by hash. A cursor is a hash
// value: stripe c's keys have hashes whose low bits are c, and a cursor
// whose low bits are c stands for the keys of stripe c with hashes of at
// least its value, and for every key of the later stripes. So a cursor
// stays valid however keys are added and removed, and however tables grow,
// and a scan from 0 to 0 visits every key present for all of it exactly
// once: the hashes of keys never change. It may visit a key added or
// removed meanwhile, or not. Keys with equal hashes (see stripe.clash) are
// visited in one call, which is why a call may visit more than count.
//
// Hashes are seeded per process, so a cursor is valid in the process that
// gave it; another process (a restart, a new leader) reads it as a place
// in its own order, where a scan goes on without error, but may miss keys
// or visit some twice (as a Redis cursor does on another server).
//
// A key whose deadline the store's clock has passed is not visited, though
// it is not removed yet (see expiry.go).
//
// Each call read-locks one stripe at a time, and looks at one segment of
// its table (segSlots slots) at a time, and at most scanSegments segments
// (a store whose tables grew large and then lost most of their keys has
// many nearly empty ones): it may visit fewer than count keys, or none,
// before it returns a cursor other than 0, as Redis's SCAN may. fn runs
// with no lock held.
func (s *Store) Scan(cursor uint64, count int, fn func(key string)) uint64 {
	count = max(count, 1)
	var keys []string
	for budget := s.scanSegments; len(keys) < count && budget > 0; {
		stripe := cursor & s.mask
		var done bool
		keys, cursor, done = s.stripes[stripe].scan(s, cursor, count-len(keys), &budget, keys)
		if done {
			if stripe == s.mask {
				cursor = 0
				break
			}
			cursor = stripe + 1
		}
	}
	for _, k := range keys {
		fn(k)
	}
	return cursor
}

// scanSegments is the most table segments a Scan looks at: about a
// millisecond's work.
const scanSegments = 256

// hashedKey is a key and its hash, for Scan.
type hashedKey struct {
	h   uint64
	key string
}

// scan appends to keys up to n keys of st from position from (whose low
// bits are st's), the fewest hashes first, all of a hash's keys or none,
// looking at one segment or more, each taken from budget, while it is
// positive; it returns them, the position to go on from, and whether st
// has no more.
func (st *stripe) scan(s *Store, from uint64, n int, budget *int, keys []string) ([]string, uint64, bool) {
	s.rlockStripe(st) // a transaction's keys are seen all or none
	defer st.mu.RUnlock()
	now := s.nowMs()
	for {
		seg := st.mu.m.seg(from)
		last := from | ^uint64(0)>>seg.depth // the last hash seg holds
		found := st.segmentKeysLocked(s, seg, from, last, now)
		*budget--
		if len(found) > 0 {
			took := takeHashes(found, n)
			for _, k := range found[:took] {
				keys = append(keys, k.key)
			}
			if took < len(found) {
				return keys, found[took].h, false
			}
			n -= took
		}
		next, ok := s.after(from, last)
		if !ok {
			return keys, 0, true
		}
		from = next
		if n <= 0 || *budget <= 0 {
			return keys, from, false
		}
	}
}

// segmentKeysLocked returns the keys of seg, and of the stripe's clash
// map, with hashes from from to last, sorted by hash; not those that have
// expired by now (Unix ms).
func (st *stripe) segmentKeysLocked(s *Store, seg *segment, from, last uint64, now int64) []hashedKey {
	var found []hashedKey
	for _, sl := range seg.slots {
		if sl.c != nil && sl.h >= from && sl.h <= last && !st.expiredLocked([]byte(sl.c.key), now) {
			found = append(found, hashedKey{sl.h, sl.c.key})
		}
	}
	for k := range st.mu.clash {
		if h := s.hash([]byte(k)); h >= from && h <= last && !st.expiredLocked([]byte(k), now) {
			found = append(found, hashedKey{h, k})
		}
	}
	slices.SortFunc(found, func(a, b hashedKey) int {
		return cmp.Or(cmp.Compare(a.h, b.h), cmp.Compare(a.key, b.key))
	})
	return found
}

// takeHashes returns how many of found, sorted by hash, make n keys, or
// more to take the last one's hash whole.
func takeHashes(found []hashedKey, n int) int {
	if n >= len(found) {
		return len(found)
	}
	took := max(n, 1)
	for took < len(found) && found[took].h == found[took-1].h {
		took++
	}
	return took
}

// after returns the first position of st after hash last, and false if
// there is none: the least hash above last whose low bits are those of
// from, a position of st.
func (s *Store) after(from, last uint64) (uint64, bool) {
	next := last&^s.mask | from&s.mask
	if next <= last {
		next += s.mask + 1
	}
	return next, next > last
}
