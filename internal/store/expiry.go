package store

import (
	"encoding/binary"
	"math"
	"sync/atomic"
)

// # Expiring keys
//
// A key may have a deadline, in Unix milliseconds as Redis keeps it. The
// store judges deadlines by its clock: the largest time that the stamps of
// the applied batches carry (see ApplyBatchAt), in Unix nanoseconds, so it
// never goes back and is the same on every replica after the same entries.
// A key has expired once the clock, in whole milliseconds, is past its
// deadline (clock > deadline, as Redis's now > when). An expired key is
// gone to every read and write from then on, whether or not it has been
// removed yet; it is removed, through the ordinary delete path, by the
// first write that touches it or by an OpExpireDue entry, which a leader's
// expirer proposes for the keys that AppendDue finds due. A relative
// expiry (EX, PX, EXPIRE, ...) is made absolute by adding it to the clock
// when its entry is applied, so every replica computes the same deadline.
//
// Each stripe keeps its keys' deadlines beside its table, not in its
// cells, so that a key without one costs nothing more: a map from key to
// deadline, and a min-heap of (deadline, key) that finds the due keys and
// the earliest deadline. The heap is lazy: changing or clearing a deadline
// leaves the old heap entry, which is stale once the map no longer holds
// its deadline for its key, and is dropped when it reaches the top or when
// stale entries outnumber live ones (tidyLocked).

// Flags of the expiry ops. ExpireRelative also modifies OpSetExpire, whose
// other flags are OpSet's.
const (
	ExpireNX       byte = 1 << 0 // OpExpire: only if the key has no deadline
	ExpireXX       byte = 1 << 1 // OpExpire: only if the key has a deadline
	ExpireGT       byte = 1 << 2 // OpExpire: only if the new deadline is later (no deadline is infinitely late)
	ExpireLT       byte = 1 << 3 // OpExpire: only if the new deadline is earlier
	ExpireRelative byte = 1 << 4 // the deadline argument is milliseconds from the clock, not Unix milliseconds
	ExpireGet      byte = 1 << 5 // OpExpire, OpPersist: return the value (GETEX)
)

// DeadlineArg encodes the deadline argument of OpSetExpire and OpExpire:
// milliseconds, absolute or relative (ExpireRelative).
func DeadlineArg(ms int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(ms)) }

// deadlines are one stripe's keys' deadlines. They are guarded by the
// stripe's lock.
//
// Invariants: a key has a deadline only if it is in the stripe; every key
// in at has an entry in heap with its deadline; the top of heap, if any,
// is live (at holds its deadline for its key).
type deadlines struct {
	at   map[string]int64 // key -> deadline, Unix ms; nil when empty
	heap []due            // min-heap by deadline
}

// due is a heap entry: a key and a deadline it had when the entry was made.
// key is a string of its own, shared with at's key, never a cell's.
type due struct {
	at  int64
	key string
}

// Clock returns the store's clock, in Unix nanoseconds.
func (s *Store) Clock() int64 { return s.clock.Load() }

// nowMs returns the clock in whole Unix milliseconds.
func (s *Store) nowMs() int64 { return s.clock.Load() / 1e6 }

// advanceClock moves the clock to now unless it is ahead. Batches applied
// concurrently (Local) may race: the clock still only grows.
func advanceClock(clock *atomic.Int64, now int64) {
	for {
		cur := clock.Load()
		if now <= cur || clock.CompareAndSwap(cur, now) {
			return
		}
	}
}

// deadlineLocked returns key's deadline, if it has one.
func (st *stripe) deadlineLocked(key []byte) (int64, bool) {
	if len(st.mu.dl.at) == 0 {
		return 0, false
	}
	at, ok := st.mu.dl.at[string(key)]
	return at, ok
}

// expiredLocked reports whether key has a deadline before now (Unix ms).
// It costs a map lookup only when some key of the stripe is due: the
// heap's top is live, so a top at or after now means none is.
func (st *stripe) expiredLocked(key []byte, now int64) bool {
	if h := st.mu.dl.heap; len(h) == 0 || h[0].at >= now {
		return false
	}
	at, ok := st.mu.dl.at[string(key)]
	return ok && at < now
}

// visibleLocked returns c, the cell of key, or nil if key has expired by
// now (Unix ms).
func (st *stripe) visibleLocked(c *cell, key []byte, now int64) *cell {
	if c != nil && st.expiredLocked(key, now) {
		return nil
	}
	return c
}

// liveLocked returns the cell of key, whose hash is h, as a write sees it:
// a key that has expired by now (Unix ms) is deleted first, through the
// ordinary delete path, and is then absent. The stripe's write lock must
// be held.
func (st *stripe) liveLocked(h uint64, key []byte, now int64) *cell {
	c := st.lookupLocked(h, key)
	if c != nil && st.expiredLocked(key, now) {
		st.deleteLocked(h, key)
		return nil
	}
	return c
}

// setDeadlineLocked gives key, which is in the stripe, the deadline at.
func (st *stripe) setDeadlineLocked(key []byte, at int64) {
	d := &st.mu.dl
	if d.at == nil {
		d.at = make(map[string]int64)
	}
	k := string(key) // a copy: never a cell's key, which would keep the cell alive
	d.at[k] = at
	d.push(due{at, k})
	st.tidyLocked()
	st.alarm.set(at)
}

// clearDeadlineLocked removes key's deadline, if it has one.
func (st *stripe) clearDeadlineLocked(key []byte) bool {
	d := &st.mu.dl
	if len(d.at) == 0 {
		return false
	}
	if _, ok := d.at[string(key)]; !ok {
		return false
	}
	delete(d.at, string(key))
	st.tidyLocked()
	return true
}

// tidyLocked drops stale entries from the top of the heap, so that its
// top is live, and rebuilds the heap from the map once stale entries
// outnumber live ones: so the heap holds at most about twice the live
// deadlines, and each entry is dropped once.
func (st *stripe) tidyLocked() {
	d := &st.mu.dl
	if len(d.heap) > 2*len(d.at)+64 {
		d.heap = d.heap[:0]
		for k, at := range d.at {
			d.heap = append(d.heap, due{at, k})
		}
		for i := len(d.heap)/2 - 1; i >= 0; i-- {
			d.down(i)
		}
	}
	for len(d.heap) > 0 && !d.live(d.heap[0]) {
		d.pop()
	}
	if len(d.at) == 0 {
		d.at, d.heap = nil, nil // give the memory back
	}
}

// live reports whether e is a key's current deadline.
func (d *deadlines) live(e due) bool {
	at, ok := d.at[e.key]
	return ok && at == e.at
}

func (d *deadlines) push(e due) {
	d.heap = append(d.heap, e)
	for i := len(d.heap) - 1; i > 0; {
		p := (i - 1) / 2
		if d.heap[p].at <= d.heap[i].at {
			break
		}
		d.heap[p], d.heap[i] = d.heap[i], d.heap[p]
		i = p
	}
}

func (d *deadlines) pop() {
	n := len(d.heap) - 1
	d.heap[0] = d.heap[n]
	d.heap[n] = due{}
	d.heap = d.heap[:n]
	d.down(0)
}

func (d *deadlines) down(i int) {
	for {
		l, small := 2*i+1, i
		if l < len(d.heap) && d.heap[l].at < d.heap[small].at {
			small = l
		}
		if r := l + 1; r < len(d.heap) && d.heap[r].at < d.heap[small].at {
			small = r
		}
		if small == i {
			return
		}
		d.heap[i], d.heap[small] = d.heap[small], d.heap[i]
		i = small
	}
}

// dueLocked calls fn with the keys whose deadlines are before now (Unix
// ms), from the top of the heap down, until fn returns false. It visits
// only entries before now, and their children: O(due keys + stale ones).
func (st *stripe) dueLocked(now int64, fn func(key string) bool) {
	h := st.mu.dl.heap
	if len(h) == 0 || h[0].at >= now {
		return
	}
	stack := []int{0}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if i >= len(h) || h[i].at >= now {
			continue
		}
		if st.mu.dl.live(h[i]) && !fn(h[i].key) {
			return
		}
		stack = append(stack, 2*i+1, 2*i+2)
	}
}

// absoluteDeadline returns the deadline that arg (see DeadlineArg) asks
// for: arg itself, or with ExpireRelative in flags, arg past the clock,
// now (Unix ms), saturated at the largest int64 (the server refuses
// expiries that would overflow by its own clock, as Redis does).
func absoluteDeadline(arg []byte, flags byte, now int64) int64 {
	ms := int64(binary.BigEndian.Uint64(arg))
	if flags&ExpireRelative == 0 {
		return ms
	}
	if ms > 0 && now > math.MaxInt64-ms {
		return math.MaxInt64
	}
	return now + ms
}

// setExpire is OpSetExpire: OpSet that gives the key a deadline.
func (s *Store) setExpire(key, val, arg []byte, flags byte) Result {
	st, h := s.locate(key)
	val = s.own(val)
	st.mu.Lock()
	defer st.mu.Unlock()
	now := s.nowMs()
	r := st.setLocked(h, key, val, flags|SetKeepTTL, now) // the new deadline replaces the old
	if r.Done {
		st.setDeadlineLocked(key, absoluteDeadline(arg, flags, now))
	}
	return r
}

// expire is OpExpire (EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT, and GETEX with
// EX, PX, EXAT or PXAT): it gives an existing key a deadline, unless NX,
// XX, GT or LT forbid it, and removes the key at once if that deadline is
// not after the clock (as Redis's checkAlreadyExpired). Int is 1 if the
// deadline was set or the key removed, 0 otherwise.
func (s *Store) expire(key, arg []byte, flags byte) Result {
	st, h := s.locate(key)
	st.mu.Lock()
	defer st.mu.Unlock()
	now := s.nowMs()
	c := st.liveLocked(h, key, now)
	if c == nil {
		return Result{}
	}
	r := Result{Found: true}
	if flags&ExpireGet != 0 {
		r.Val = c.val
	}
	at := absoluteDeadline(arg, flags, now)
	cur, has := st.deadlineLocked(key)
	switch {
	case flags&ExpireNX != 0 && has,
		flags&ExpireXX != 0 && !has,
		flags&ExpireGT != 0 && (!has || at <= cur),
		flags&ExpireLT != 0 && has && at >= cur:
		return r
	}
	r.Int = 1
	if at <= now {
		st.deleteLocked(h, key)
	} else {
		st.setDeadlineLocked(key, at)
	}
	return r
}

// persist is OpPersist (PERSIST, GETEX PERSIST): it removes an existing
// key's deadline. Int is 1 if the key had one.
func (s *Store) persist(key []byte, flags byte) Result {
	st, h := s.locate(key)
	st.mu.Lock()
	defer st.mu.Unlock()
	c := st.liveLocked(h, key, s.nowMs())
	if c == nil {
		return Result{}
	}
	r := Result{Found: true}
	if flags&ExpireGet != 0 {
		r.Val = c.val
	}
	if st.clearDeadlineLocked(key) {
		r.Int = 1
	}
	return r
}

// expireDue is OpExpireDue: it removes those of keys whose deadlines the
// clock has passed, and leaves the others (a key written since the
// expirer found it due). Int is the number removed.
func (s *Store) expireDue(keys [][]byte) Result {
	ls := s.lockSetOf(keys, 1)
	s.lock(ls)
	defer s.unlock(ls)
	now := s.nowMs()
	var n int64
	for _, k := range keys {
		if st, h := s.locate(k); st.expiredLocked(k, now) { // so it is in the stripe
			st.deleteLocked(h, k)
			n++
		}
	}
	return Result{Int: n}
}

// expiredLocked returns the keys that have expired by now (Unix ms) but
// are still stored, or nil if there are none. The caller holds every
// stripe's lock.
func (s *Store) expiredLocked(now int64) map[string]bool {
	var gone map[string]bool
	for i := range s.stripes {
		s.stripes[i].dueLocked(now, func(key string) bool {
			if gone == nil {
				gone = make(map[string]bool)
			}
			gone[key] = true
			return true
		})
	}
	return gone
}

// TTL returns key's deadline (Unix ms) and whether it has one; found is
// false if the key does not exist or has expired.
func (s *Store) TTL(key []byte) (deadline int64, has, found bool) {
	st, h := s.locate(key)
	now := s.nowMs()
	s.rlockStripe(st) // a transaction's writes are seen all or none
	defer st.mu.RUnlock()
	if st.visibleLocked(st.lookupLocked(h, key), key, now) == nil {
		return 0, false, false
	}
	deadline, has = st.deadlineLocked(key)
	return deadline, has, true
}

// readDeadline is OpDeadline: TTL for a transaction, whose reads must see
// its writes before them, so are entries of it (see OpRead). Its result
// has the shape of OpRead's, for one key: Found, and Val the deadline, as
// DeadlineArg encodes it, or nil if the key has none. It does not wait for
// busy stripes: it runs inside a transaction, which marked them.
func (s *Store) readDeadline(key []byte) Result {
	st, h := s.locate(key)
	st.mu.RLock()
	defer st.mu.RUnlock()
	r := Result{Found: st.visibleLocked(st.lookupLocked(h, key), key, s.nowMs()) != nil}
	if at, has := st.deadlineLocked(key); r.Found && has {
		r.Val = DeadlineArg(at)
	}
	return Result{Done: true, Sub: []Result{r}}
}

// AppendDue adds to b the OpExpireDue entries that remove up to most of
// the keys whose deadlines are before now (Unix ms) or the clock, whichever
// is later, one entry for each stripe that has any, and returns how many
// keys they name. It takes one stripe's read lock at a time, for as long
// as finding its due keys takes, and starts each call at the stripe after
// the last one it reached, so that a stripe with many due keys does not
// hold up the others'. Applying the entries removes those keys whose
// deadlines the clock has passed by then.
func (s *Store) AppendDue(b *Batch, now int64, most int) int {
	now = max(now, s.nowMs())
	var keys [][]byte
	n := 0
	from := int(s.dueFrom.Load())
	for j := range s.stripes {
		i := (from + j) & int(s.mask)
		st := &s.stripes[i]
		keys = keys[:0]
		st.mu.RLock()
		st.dueLocked(now, func(key string) bool {
			keys = append(keys, []byte(key))
			return n+len(keys) < most
		})
		st.mu.RUnlock()
		if len(keys) > 0 {
			b.Add(OpExpireDue, 0, keys...)
			n += len(keys)
		}
		if n >= most {
			s.dueFrom.Store(uint32(i))
			return n
		}
	}
	return n
}

// Expires returns the number of keys with a deadline, those that have
// expired but are not removed yet included (as Len counts them).
func (s *Store) Expires() int64 {
	var n int64
	for i := range s.stripes {
		st := &s.stripes[i]
		st.mu.RLock()
		n += int64(len(st.mu.dl.at))
		st.mu.RUnlock()
	}
	return n
}

// AvgTTL estimates the average time left to the keys with deadlines after
// now (Unix ms), in ms, from up to about most of them, read a stripe at a
// time (the keys of a stripe that Go's map iteration gives first): INFO's
// avg_ttl, which Redis estimates from a sample too. It is 0 if no key has
// a deadline after now.
func (s *Store) AvgTTL(now int64, most int) int64 {
	per := most/len(s.stripes) + 1
	var sum, n int64
	for i := range s.stripes {
		st := &s.stripes[i]
		st.mu.RLock()
		seen := 0
		for _, at := range st.mu.dl.at {
			if seen++; seen > per {
				break
			}
			if at > now {
				sum += at - now
				n++
			}
		}
		st.mu.RUnlock()
	}
	if n == 0 {
		return 0
	}
	return sum / n
}

// anyDueLocked reports whether any key has expired by now (Unix ms) but is
// still stored. The caller holds every stripe's lock.
func (s *Store) anyDueLocked(now int64) bool {
	for i := range s.stripes {
		if h := s.stripes[i].mu.dl.heap; len(h) > 0 && h[0].at < now {
			return true
		}
	}
	return false
}
