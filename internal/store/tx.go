package store

import (
	"encoding/binary"
	"fmt"
)

// # Transactions
//
// An OpExec entry is one transaction (MULTI/EXEC): the keys its client
// watched, each with its watch position (see WatchPoint), and the entries
// of its commands, applied as one. Its arguments:
//
//	+-----------------+-------------------------------+------------------------+
//	| n (8 bytes, BE) | n x (key, position (8 B, BE)) | entries, each an arg   |
//	+-----------------+-------------------------------+------------------------+
//
// where each entry is in AppendEntry's format. An entry may be an OpRead,
// which reads its keys where it stands, or an OpSeq followed by the write
// it wraps; not an OpExec or another session op.
//
// Applying it first checks the watched keys: if a write changed one after
// its position (see Watch positions), or its deadline has passed by the
// store's clock (see expiry.go), nothing is applied and the result's
// Done is false (EXEC's nil reply). Otherwise its entries are applied in
// order, each seeing those before it, with their results, in order, in
// Sub; Done is true. An entry's error (ErrNotInteger, ...) is in its
// result and does not stop the others, as in Redis.
//
// A transaction is isolated: a reader of its keys (Get, MGet, Exists, a
// Snapshot, RangeN) sees all of its writes or none. While it applies, the
// stripes of its keys (every stripe if it flushes) are marked busy, and
// readers of a busy stripe wait until it is not. This holds for readers;
// writers are one goroutine that applies entries in order, which marks
// and clears the stripes, so no other write runs meanwhile.

// Tx builds the arguments of an OpExec entry. The zero Tx is empty and
// ready to use.
type Tx struct {
	watches [][]byte // key, position, key, position, ...
	buf     []byte   // the entries, back to back
	ends    []int    // where each entry ends in buf
}

// Watch adds key, watched at position pos. Tx keeps key: the caller must
// not modify it.
func (t *Tx) Watch(key []byte, pos uint64) {
	t.watches = append(t.watches, key, binary.BigEndian.AppendUint64(nil, pos))
}

// Add adds an entry.
func (t *Tx) Add(op Op, flags byte, args ...[]byte) {
	t.buf = AppendEntry(t.buf, op, flags, args...)
	t.ends = append(t.ends, len(t.buf))
}

// Watched returns the number of keys watched.
func (t *Tx) Watched() int { return len(t.watches) / 2 }

// Len returns the number of entries added.
func (t *Tx) Len() int { return len(t.ends) }

// Args returns the arguments of the OpExec entry. They share t's memory:
// they are valid until the next call of a method of t.
func (t *Tx) Args() [][]byte {
	args := make([][]byte, 0, 1+len(t.watches)+len(t.ends))
	args = append(args, binary.BigEndian.AppendUint64(nil, uint64(len(t.watches)/2)))
	args = append(args, t.watches...)
	start := 0
	for _, end := range t.ends {
		args = append(args, t.buf[start:end])
		start = end
	}
	return args
}

// Reset empties t.
func (t *Tx) Reset() { *t = Tx{} }

// execParts splits the arguments of an OpExec that checkExec accepted into
// its watched keys and positions, and its entries.
func execParts(args [][]byte) (watches, entries [][]byte) {
	n := int(binary.BigEndian.Uint64(args[0]))
	return args[1 : 1+2*n], args[1+2*n:]
}

// checkExec verifies the arguments of an OpExec (see Transactions).
func checkExec(args [][]byte) error {
	if len(args) < 1 || len(args[0]) != 8 || binary.BigEndian.Uint64(args[0]) > uint64(len(args)-1)/2 {
		return fmt.Errorf("%w: OpExec with a bad watch count", ErrBadEntry)
	}
	watches, entries := execParts(args)
	for i := 1; i < len(watches); i += 2 {
		if len(watches[i]) != 8 {
			return fmt.Errorf("%w: OpExec with a watch position of %d bytes", ErrBadEntry, len(watches[i]))
		}
	}
	var ws wrapCheck
	var scratch [8][]byte
	for i, b := range entries {
		// Look at the op before decoding: a nested OpExec is refused
		// without being decoded, so that decoding never recurses.
		if len(b) > 1 && (Op(b[1]) == OpExec || Op(b[1]) == OpSessionOpen || Op(b[1]) == OpSessionClose) {
			return fmt.Errorf("%w: entry %d of an OpExec has op %d, which a transaction cannot hold", ErrBadEntry, i, b[1])
		}
		e, err := decodeEntry(b, scratch[:0])
		if err != nil {
			return fmt.Errorf("entry %d of an OpExec: %w", i, err)
		}
		if err := ws.next(e.op, i); err != nil {
			return err
		}
	}
	return ws.end()
}

// exec applies an OpExec entry of a batch stamped at (see Transactions).
func (s *Store) exec(e entry, at Stamp) Result {
	watches, raw := execParts(e.args)
	now := s.nowMs()
	for i := 0; i < len(watches); i += 2 {
		if s.ver.changedAfter(watches[i], binary.BigEndian.Uint64(watches[i+1])) || s.expired(watches[i], now) {
			return Result{}
		}
	}
	ents := make([]entry, len(raw))
	for i, b := range raw {
		ents[i], _ = decodeEntry(b, nil) // checked by checkExec
	}
	for _, se := range ents {
		if s.refused(se) { // a slot of it is moving: all or nothing (see slotmove.go)
			return Result{Err: ErrSlotMoving}
		}
	}
	ls := s.txLocks(ents)
	done := s.markBusy(ls)
	defer s.clearBusy(ls, done)
	res := make([]Result, len(ents))
	var w wrap
	for i, se := range ents {
		res[i] = s.applyAt(se, at, &w)
	}
	return Result{Done: true, Sub: res}
}

// expired reports whether key has expired by now (Unix ms), removed or
// not: a watched key that has counts as changed, as in Redis.
func (s *Store) expired(key []byte, now int64) bool {
	st, _ := s.locate(key)
	st.mu.RLock()
	defer st.mu.RUnlock()
	return st.expiredLocked(key, now)
}

// txLocks returns the stripes of the keys of ents, or every stripe if one
// of them flushes.
func (s *Store) txLocks(ents []entry) lockSet {
	var keys [][]byte
	for _, e := range ents {
		if e.op == OpFlush {
			return s.every
		}
		ks, stride := e.keys()
		for j := 0; j < len(ks); j += stride {
			keys = append(keys, ks[j])
		}
	}
	return s.lockSetOf(keys, 1)
}

// read is OpRead: each key's value, in Sub. It does not wait for busy
// stripes: it runs inside a transaction, which marked them.
func (s *Store) read(keys [][]byte) Result {
	sub := make([]Result, len(keys))
	for i, k := range keys {
		st, h := s.locate(k)
		st.mu.RLock()
		c := st.visibleLocked(st.lookupLocked(h, k), k, s.nowMs())
		st.mu.RUnlock()
		sub[i] = Result{Found: c != nil, Val: c.value()}
	}
	return Result{Done: true, Sub: sub}
}

// markBusy marks the stripes ls busy for a transaction, and returns the
// channel it closes once it clears them.
func (s *Store) markBusy(ls lockSet) chan struct{} {
	done := make(chan struct{})
	s.txDone.Store(&done)
	s.setBusy(ls, true)
	return done
}

// clearBusy clears the marks of markBusy and wakes the readers waiting.
func (s *Store) clearBusy(ls lockSet, done chan struct{}) {
	s.setBusy(ls, false)
	close(done)
}

func (s *Store) setBusy(ls lockSet, busy bool) {
	s.lock(ls)
	for _, i := range ls {
		s.stripes[i].mu.busy = busy
	}
	s.unlock(ls)
}

// busyLocked returns the channel to wait on if a stripe of ls is busy, or
// nil; the caller holds ls's locks, read or write.
func (s *Store) busyLocked(ls lockSet) chan struct{} {
	for _, i := range ls {
		if s.stripes[i].mu.busy {
			return *s.txDone.Load()
		}
	}
	return nil
}

// rlockStripe read-locks st once no transaction has it busy.
func (s *Store) rlockStripe(st *stripe) {
	for st.mu.RLock(); st.mu.busy; st.mu.RLock() {
		done := *s.txDone.Load()
		st.mu.RUnlock()
		<-done
	}
}

// rlock read-locks the stripes ls, in order, once no transaction has one
// busy.
func (s *Store) rlock(ls lockSet) {
	for {
		for _, i := range ls {
			s.stripes[i].mu.RLock()
		}
		done := s.busyLocked(ls)
		if done == nil {
			return
		}
		s.runlock(ls)
		<-done
	}
}

// lockQuiet write-locks the stripes ls, in order, once no transaction has
// one busy: for readers that need the write locks (views, RangeN).
func (s *Store) lockQuiet(ls lockSet) {
	for {
		s.lock(ls)
		done := s.busyLocked(ls)
		if done == nil {
			return
		}
		s.unlock(ls)
		<-done
	}
}
