package store

import (
	"encoding/binary"
	"fmt"
	"strconv"
)

// Result is the outcome of applying one entry. Which fields are meaningful
// depends on the op:
//
//	OpSet           Done: whether the value was written (NX/XX); Found, Val: old value
//	OpMSet          Done is true
//	OpMSetNX        Done: whether all keys were written
//	OpDel           Int: number of keys removed
//	OpIncrBy        Int: new value
//	OpAppend        Int: new length
//	OpCAS           Done: whether the swap happened; Found: whether the key existed
//	OpFlush         Done is true
//	OpSessionOpen   Done is true; Int: the new session's client id
//	OpSeq           Done is true, unless it refuses the write it wraps (see the package doc)
//	OpSessionClose  Done: whether the session was open
//	OpExec          Done: whether it applied (no watched key changed); Sub: its entries' results
//	OpRead          Done is true; Sub: each key's Found and Val
//	OpSetExpire     as OpSet
//	OpExpire        Int: 1 if the deadline was set or the key removed; Found, Val (with ExpireGet): the value
//	OpPersist       Int: 1 if a deadline was removed; Found, Val (with ExpireGet): the value
//	OpExpireDue     Int: number of keys removed
//	OpDeadline      Done is true; Sub: one Result, Found: whether the key exists, Val: its deadline (DeadlineArg's encoding) or nil if none
//	ops 40 to 69    see their list in keyspace.go
//
// Err is set, and nothing changed, when the command failed on the data
// (ErrNotInteger, ErrOverflow, ErrTooLarge, and those of keyspace.go) or on the session table
// (ErrSessionExpired, ErrStaleSequence, ErrNoStamp, ErrTooManyOpens). Val
// is shared with the store and must not be modified.
type Result struct {
	Done  bool
	Found bool
	Val   []byte
	Int   int64
	Err   error
	Sub   []Result
}

// Apply decodes and applies one entry. Unless Retain is on, it does not
// retain entry: stored values are copied out of it. A malformed entry returns an error wrapping
// ErrBadEntry and changes nothing, and so does an OpSeq, which needs the
// entry it wraps after it in a batch. Other session ops fail with
// ErrNoStamp: they need ApplyBatchAt.
func (s *Store) Apply(entry []byte) (Result, error) {
	var scratch [8][]byte
	e, err := decodeEntry(entry, scratch[:0])
	if err == nil && e.op == OpSeq {
		err = errSeqAtEnd
	}
	if err != nil {
		return Result{}, err
	}
	if e.op.session() {
		return Result{Err: ErrNoStamp}, nil
	}
	exclusive := e.op == OpExec
	s.lockApplying(exclusive)
	defer s.unlockApplying(exclusive)
	return s.apply(e), nil
}

// apply applies a decoded entry that is not a session op.
func (s *Store) apply(e entry) Result {
	switch {
	case e.op.slotOp():
		return s.applySlotOp(e)
	case s.refused(e):
		return Result{Err: ErrSlotMoving}
	}
	switch e.op {
	case OpSet:
		return s.set(e.args[0], e.args[1], e.flags)
	case OpMSet:
		return s.mset(e.args)
	case OpMSetNX:
		return s.msetnx(e.args)
	case OpDel:
		return s.del(e.args)
	case OpIncrBy:
		return s.incrBy(e.args[0], int64(binary.BigEndian.Uint64(e.args[1])))
	case OpAppend:
		return s.append(e.args[0], e.args[1])
	case OpCAS:
		return s.cas(e.args[0], e.args[1], e.args[2])
	case OpFlush:
		return s.flush()
	case OpRead:
		return s.read(e.args)
	case OpExec:
		return s.exec(e, Stamp{})
	case OpSetExpire:
		return s.setExpire(e.args[0], e.args[1], e.args[2], e.flags)
	case OpExpire:
		return s.expire(e.args[0], e.args[1], e.flags)
	case OpPersist:
		return s.persist(e.args[0], e.flags)
	case OpExpireDue:
		return s.expireDue(e.args)
	case OpDeadline:
		return s.readDeadline(e.args[0])
	}
	if keyspaceOp(e.op) {
		return s.applyKeyspace(e)
	}
	panic(fmt.Sprintf("store: apply of op %d, which decodeEntry refuses or applySession takes", e.op))
}

// Retain sets whether Apply keeps the values it stores as slices of its
// entries rather than copies. Turn it on only while applying entries whose
// bytes never change and stay valid for the life of the process (a log
// replayed from mapped files at startup), and only while no other goroutine
// uses the store.
func (s *Store) Retain(on bool) { s.retain = on }

// own returns what the store keeps of a command's value argument. A
// retained slice has its capacity cut to its length, so that APPEND never
// writes past it.
func (s *Store) own(b []byte) []byte {
	if s.retain {
		return b[:len(b):len(b)]
	}
	return append(make([]byte, 0, len(b)), b...)
}

func (s *Store) set(key, val []byte, flags byte) Result {
	st, h := s.locate(key)
	val = s.own(val)
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.setLocked(h, key, val, flags, s.nowMs())
}

// setLocked is OpSet of val, which the store owns, under key, whose hash
// is h, at now (Unix ms). It clears key's deadline unless flags has
// SetKeepTTL.
func (st *stripe) setLocked(h uint64, key, val []byte, flags byte, now int64) Result {
	old := st.liveLocked(h, key, now)
	found := old != nil
	r := Result{Found: found}
	if flags&SetGet != 0 {
		r.Val = old.value()
	}
	if (flags&SetNX != 0 && found) || (flags&SetXX != 0 && !found) {
		return r
	}
	st.replaceLocked(old, h, key, val)
	if flags&SetKeepTTL == 0 {
		st.clearDeadlineLocked(key)
	}
	r.Done = true
	return r
}

func (s *Store) mset(args [][]byte) Result {
	vals := make([][]byte, len(args)/2)
	for i := range vals {
		vals[i] = s.own(args[2*i+1])
	}
	ls := s.lockSetOf(args, 2)
	s.lock(ls)
	defer s.unlock(ls)
	now := s.nowMs()
	for i := 0; i < len(args); i += 2 {
		st, h := s.locate(args[i])
		st.setLocked(h, args[i], vals[i/2], 0, now)
	}
	return Result{Done: true}
}

func (s *Store) msetnx(args [][]byte) Result {
	ls := s.lockSetOf(args, 2)
	s.lock(ls)
	defer s.unlock(ls)
	now := s.nowMs()
	for i := 0; i < len(args); i += 2 {
		if st, h := s.locate(args[i]); st.liveLocked(h, args[i], now) != nil {
			return Result{}
		}
	}
	for i := 0; i < len(args); i += 2 {
		st, h := s.locate(args[i])
		st.putLocked(h, args[i], s.own(args[i+1]))
	}
	return Result{Done: true}
}

func (s *Store) del(keys [][]byte) Result {
	ls := s.lockSetOf(keys, 1)
	s.lock(ls)
	defer s.unlock(ls)
	var n int64
	now := s.nowMs()
	for _, k := range keys {
		if st, h := s.locate(k); st.liveLocked(h, k, now) != nil && st.deleteLocked(h, k) {
			n++
		}
	}
	return Result{Int: n}
}

func (s *Store) incrBy(key []byte, delta int64) Result {
	st, h := s.locate(key)
	st.mu.Lock()
	defer st.mu.Unlock()
	var n int64
	old := st.liveLocked(h, key, s.nowMs())
	if old != nil {
		var valid bool
		if n, valid = parseInt(old.val); !valid {
			return Result{Err: ErrNotInteger}
		}
	}
	if (delta > 0 && n > maxInt64-delta) || (delta < 0 && n < minInt64-delta) {
		return Result{Err: ErrOverflow}
	}
	n += delta
	st.replaceLocked(old, h, key, strconv.AppendInt(nil, n, 10))
	return Result{Int: n}
}

const (
	maxInt64 = 1<<63 - 1
	minInt64 = -1 << 63
)

func (s *Store) append(key, suffix []byte) Result {
	st, h := s.locate(key)
	st.mu.Lock()
	defer st.mu.Unlock()
	old := st.liveLocked(h, key, s.nowMs())
	cur := old.value()
	if len(cur)+len(suffix) > s.maxValue {
		return Result{Err: ErrTooLarge}
	}
	// append may fill cur's spare capacity in place: that is safe because no
	// reader sees past len(cur), and only the current value of a key is ever
	// appended to.
	v := append(cur[:len(cur):cap(cur)], suffix...)
	st.replaceLocked(old, h, key, v)
	return Result{Int: int64(len(v))}
}

func (s *Store) cas(key, expected, val []byte) Result {
	st, h := s.locate(key)
	st.mu.Lock()
	defer st.mu.Unlock()
	old := st.liveLocked(h, key, s.nowMs())
	if old == nil || !equal(old.val, expected) {
		return Result{Found: old != nil}
	}
	st.replaceLocked(old, h, key, s.own(val))
	st.clearDeadlineLocked(key) // a swap sets the value, as SET does
	return Result{Done: true, Found: true}
}

func (s *Store) flush() Result {
	s.lock(s.every)
	defer s.unlock(s.every)
	s.ver.flushed.Store(s.ver.cur.Add(1))
	for i := range s.stripes {
		s.stripes[i].resetLocked(s.freshOf(i))
	}
	return Result{Done: true}
}

// parseInt parses b as Redis does for INCR: a base-10 int64 in canonical
// form, with no sign on zero, no '+', no leading zeros and no spaces.
func parseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return 0, false
	}
	var buf [20]byte
	return n, string(strconv.AppendInt(buf[:0], n, 10)) == string(b)
}
