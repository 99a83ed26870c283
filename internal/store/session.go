package store

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"time"
)

// Errors of the session ops, returned in Result.Err (see the package doc).
var (
	ErrSessionExpired = errors.New("store: session expired or unknown; open a new session")
	ErrStaleSequence  = errors.New("store: sequence number acknowledged already, or its reply no longer kept; the write's outcome is unknown")
	ErrNoStamp        = errors.New("store: session command applied without a log stamp; sessions need the replicated log")
	ErrTooManyOpens   = errors.New("store: too many sessions opened in one log entry, or ever; retry")
)

// Stamp says which log entry a batch is in: the entry's raft index, and
// the time its leader stamped into it, in Unix nanoseconds. The batches of
// one entry share its stamp. The zero Stamp is none: raft's indexes start
// at 1.
type Stamp struct {
	Index uint64
	Time  int64
}

// Session defaults (see Options).
const (
	defaultSessionTTL     = 10 * time.Minute
	defaultMaxSessions    = 100_000
	defaultSessionResults = 1024
	defaultSessionBytes   = 1 << 20
	defaultSessionMemory  = 256 << 20
)

// What a session and a kept result cost beyond their values, roughly, in
// the estimate that Options.MaxSessionMemory bounds: the structs, a map
// slot, and the slack of growing slices.
const (
	sessionCost = 160
	resultCost  = 96
)

// expireStep is the most sessions that one batch expires: so that a
// million sessions that expire at once cost that many batches a few
// microseconds each, not one batch a long stall. A session idle too long
// has expired to every op, whether or not it has been removed yet.
const expireStep = 64

// openBits is how many low bits of a client id count the sessions opened
// in one log entry, in a store that is not a sharded group's (Options.Group
// 0); the entry's index is in the bits above them.
const openBits = 16

// groupBits is how many low bits of a client id hold the id of the group
// that opened the session, in a sharded group's store (Options.Group, at
// most maxGroup); the bits above them count the sessions the group opened.
// A session carried to another group with a slot move keeps its id, which
// no session that group opens can have.
const groupBits = 16

// maxGroup is the largest group id a store may have (Options.Group).
const maxGroup = 1<<groupBits - 1

// sessionLimits are the bounds on a session table, from Options, and the
// id of its group, in the low groupBits of the ids it issues.
type sessionLimits struct {
	group    uint64
	ttl      uint64 // idle time after which a session expires, in nanoseconds
	sessions int    // most sessions
	results  int    // most kept results a session
	bytes    int    // most bytes a session's kept results hold, as keptSize counts them
	memory   int64  // most memory of the whole table, as mem estimates it
}

// limitsOf returns the session limits that opt asks for, with defaults
// for those it leaves zero. The memory bound is at least what one session
// may hold, so that a session within its own bounds never has to shrink
// for want of memory once it is the only one.
func limitsOf(opt Options) sessionLimits {
	l := sessionLimits{
		group:    opt.Group,
		ttl:      uint64(orDefault(opt.SessionTTL, defaultSessionTTL)),
		sessions: orDefault(opt.MaxSessions, defaultMaxSessions),
		results:  orDefault(opt.MaxSessionResults, defaultSessionResults),
		bytes:    orDefault(opt.MaxSessionBytes, defaultSessionBytes),
	}
	l.memory = max(orDefault(opt.MaxSessionMemory, defaultSessionMemory), sessionCost+int64(l.results)*resultCost+int64(l.bytes))
	return l
}

// orDefault returns v, or def if v is not positive.
func orDefault[T int | int64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// sessionTable is the client-session table. It is not safe for concurrent
// use: the store's sessions mutex guards it.
type sessionTable struct {
	lim sessionLimits
	// clock is the session clock: the largest Stamp.Time seen. Invariant:
	// it never decreases, and no session's active exceeds it.
	clock int64
	// lastID is the last client id this group issued, 0 if none.
	// Invariant: no session this group opened has an id above it. Ids
	// only grow, so an id is never issued twice. Sessions that slot moves
	// brought from other groups (importSessions) have ids of those groups.
	lastID uint64
	byID   map[uint64]*session
	// head and tail end the list of the sessions from the least to the
	// most recently active. Invariant: their active times never decrease
	// from head to tail, so the head is the first to expire or be evicted.
	head, tail *session
	// mem estimates the memory the table holds, in bytes. Invariant: it is
	// the sum over its sessions of sessionCost + resultCost*len(results) +
	// bytes.
	mem int64
}

// session is one client's session.
type session struct {
	id     uint64
	active int64 // the session clock when a session op last used it
	// floor is the lowest seq that may still be applied. Invariant: the
	// result of every write applied under a seq at or above floor is in
	// results, which holds no other, in ascending seq.
	floor      uint64
	results    []kept
	bytes      int      // the sum of keptSize over results
	prev, next *session // neighbours in the table's list
}

// kept is the result of the write that a session applied under seq. Its
// Val and Sub, and theirs, are copies of its own, never modified: the
// answers to retries share them.
type kept struct {
	seq uint64
	res Result
}

// wrap is what an OpSeq decided about the entry after it, which it wraps.
type wrap struct {
	on      bool // the next entry is wrapped
	apply   bool // apply it and keep its result under id and seq; else answer res
	id, seq uint64
	res     Result
}

func newSessionTable(lim sessionLimits) sessionTable {
	return sessionTable{lim: lim, byID: make(map[uint64]*session)}
}

// advanceSessions moves the session clock to now, unless it is ahead, and
// expires up to expireStep of the sessions idle too long by it.
func (s *Store) advanceSessions(now int64) {
	s.sessions.Lock()
	defer s.sessions.Unlock()
	s.sessions.t.advance(now)
}

// applySession applies e, a session op of a batch stamped at. An OpSeq
// sets w to what it decided about the entry after it.
func (s *Store) applySession(e entry, at Stamp, w *wrap) Result {
	if at.Index == 0 {
		res, wr := refuse(ErrNoStamp)
		if e.op == OpSeq {
			*w = wr
		}
		return res
	}
	s.sessions.Lock()
	defer s.sessions.Unlock()
	t := &s.sessions.t
	switch e.op {
	case OpSessionOpen:
		return t.open(at.Index)
	case OpSessionClose:
		return t.close(argUint64(e, 0))
	}
	res, wr := t.seq(argUint64(e, 0), argUint64(e, 1), argUint64(e, 2))
	*w = wr
	return res
}

// applyWrapped applies e, the entry an OpSeq wraps in a batch stamped at,
// as w says, and clears w.
func (s *Store) applyWrapped(e entry, at Stamp, w *wrap) Result {
	d := *w
	*w = wrap{}
	if !d.apply {
		return d.res
	}
	var res Result
	if e.op == OpExec {
		res = s.exec(e, at)
	} else {
		res = s.apply(e)
	}
	if res.Err == ErrSlotMoving { // not applied: a retry where the slot went may apply it
		return res
	}
	s.sessions.Lock()
	defer s.sessions.Unlock()
	s.sessions.t.keep(d.id, d.seq, res)
	return res
}

// argUint64 returns e's argument i, an 8-byte one (see entry.check).
func argUint64(e entry, i int) uint64 { return binary.BigEndian.Uint64(e.args[i]) }

// refuse returns the results of an OpSeq whose write is refused with err:
// its own, and its decision about the write.
func refuse(err error) (Result, wrap) {
	res := Result{Err: err}
	return res, wrap{on: true, res: res}
}

// advance is Store.advanceSessions.
func (t *sessionTable) advance(now int64) {
	t.clock = max(t.clock, now)
	for n := 0; n < expireStep && t.head != nil && t.expired(t.head); n++ {
		t.remove(t.head)
	}
}

// expired reports whether ss has been idle longer than the TTL.
func (t *sessionTable) expired(ss *session) bool {
	return uint64(t.clock)-uint64(ss.active) > t.lim.ttl // exact: clock >= active
}

// open opens a session in the log entry at index (see openAt and
// openInGroup). Opening a session past MaxSessions evicts the least
// recently active one.
func (t *sessionTable) open(index uint64) Result {
	var id uint64
	var err error
	if t.lim.group == 0 {
		id, err = t.idAt(index)
	} else {
		id, err = t.idInGroup()
	}
	if err != nil {
		return Result{Err: err}
	}
	for len(t.byID) >= t.lim.sessions {
		t.remove(t.head)
	}
	ss := &session{id: id, active: t.clock}
	t.lastID = id
	t.byID[id] = ss
	t.mem += sessionCost
	t.pushBack(ss)
	t.evict(ss)
	return Result{Done: true, Int: int64(id)}
}

// idAt returns the client id of a session opened in the log entry at
// index, in a store that is not a sharded group's: index in the bits
// above openBits and, below them, how many sessions that entry opened
// before it; unique, and the same on every replica. It is refused once an
// entry has opened 1<<openBits sessions, at an index below that of an
// earlier open (stamps out of order), and from index 1<<47, some four
// years of a million entries a second, since ids must fit in Result.Int.
func (t *sessionTable) idAt(index uint64) (uint64, error) {
	id := max(index<<openBits, t.lastID+1) // lastID+1 in the same entry
	if id>>openBits != index || id > math.MaxInt64 {
		return 0, ErrTooManyOpens
	}
	return id, nil
}

// idInGroup returns the client id of a session opened in a sharded
// group's store: the count of the sessions the group opened, this one
// included, above groupBits, and the group's id below them; unique in the
// cluster, and the same on every replica. The count goes on from the last
// id issued, so a store that issued ids by index before it was given a
// group issues none twice. It is refused once the count would pass
// 2^47-1, since ids must fit in Result.Int.
func (t *sessionTable) idInGroup() (uint64, error) {
	count := t.lastID>>groupBits + 1
	if count > math.MaxInt64>>groupBits {
		return 0, ErrTooManyOpens
	}
	return count<<groupBits | t.lim.group, nil
}

// close closes session id, and reports in Done whether it was open.
func (t *sessionTable) close(id uint64) Result {
	ss := t.live(id)
	if ss == nil {
		return Result{}
	}
	t.remove(ss)
	return Result{Done: true}
}

// seq judges the write that an OpSeq wraps: the write numbered seq of
// session id, whose client has the replies of every write below lowest.
// It returns the OpSeq's own result and its decision about the write (see
// the package doc). seq 2^64-1 is always stale: no floor can pass it.
func (t *sessionTable) seq(id, seq, lowest uint64) (Result, wrap) {
	ss := t.live(id)
	if ss == nil {
		return refuse(ErrSessionExpired)
	}
	t.touch(ss)
	t.ack(ss, lowest)
	if seq < ss.floor || seq == math.MaxUint64 {
		return refuse(ErrStaleSequence)
	}
	if i, found := ss.find(seq); found && !reapply() {
		return Result{Done: true}, wrap{on: true, res: ss.results[i].res}
	}
	return Result{Done: true}, wrap{on: true, apply: true, id: id, seq: seq}
}

// keep keeps a copy of res, the result of the write that session id
// applied under seq, then drops the oldest results and sessions past the
// bounds. Only a concurrent ApplyBatchAt, which voids exactly-once, can
// have removed the session, passed seq or kept a result under it since the
// OpSeq judged it: then res is not kept.
func (t *sessionTable) keep(id, seq uint64, res Result) {
	ss := t.byID[id]
	if ss == nil || seq < ss.floor {
		return
	}
	i, found := ss.find(seq)
	if found {
		return
	}
	res = cloneResult(res)
	n := keptSize(res)
	ss.results = slices.Insert(ss.results, i, kept{seq: seq, res: res})
	ss.bytes += n
	t.mem += resultCost + int64(n)
	for len(ss.results) > t.lim.results || ss.bytes > t.lim.bytes {
		t.dropOldest(ss)
	}
	t.evict(ss)
}

// cloneResult returns a copy of res whose Val and Sub, and theirs, are
// its own.
func cloneResult(res Result) Result {
	res.Val = bytes.Clone(res.Val) // nil stays nil
	if res.Sub != nil {
		sub := make([]Result, len(res.Sub))
		for i, r := range res.Sub {
			sub[i] = cloneResult(r)
		}
		res.Sub = sub
	}
	return res
}

// keptSize is what a kept result counts for in a session's bytes and the
// table's memory beyond resultCost: its Val, and its sub-results' (an
// OpExec's, and theirs), each sub-result also counting resultCost.
func keptSize(res Result) int {
	n := len(res.Val)
	for _, r := range res.Sub {
		n += resultCost + keptSize(r)
	}
	return n
}

// live returns session id, or nil if it is unknown or has expired; an
// expired one it removes.
func (t *sessionTable) live(id uint64) *session {
	ss := t.byID[id]
	if ss != nil && t.expired(ss) {
		t.remove(ss)
		return nil
	}
	return ss
}

// find returns where seq's result is in ss.results, or would be, and
// whether it is there. (Looking at the last result first, as most seqs
// come in order, gained nothing measurable on
// BenchmarkApplyBatchSessions/seq: 936-1514 against 952-1836 ns a write.)
func (ss *session) find(seq uint64) (int, bool) {
	return slices.BinarySearchFunc(ss.results, seq, func(k kept, seq uint64) int { return cmp.Compare(k.seq, seq) })
}

// ack raises ss's floor to lowest, dropping the results below it.
func (t *sessionTable) ack(ss *session, lowest uint64) {
	if lowest <= ss.floor {
		return
	}
	ss.floor = lowest
	i, _ := ss.find(lowest)
	t.drop(ss, i)
}

// dropOldest drops ss's result of the lowest seq, and raises the floor past
// it: a retry of that write is stale now.
func (t *sessionTable) dropOldest(ss *session) {
	ss.floor = ss.results[0].seq + 1 // the seq is below 2^64-1: see seq
	t.drop(ss, 1)
}

// drop drops the first n of ss's results.
func (t *sessionTable) drop(ss *session, n int) {
	b := 0
	for _, k := range ss.results[:n] {
		b += keptSize(k.res)
	}
	ss.bytes -= b
	t.mem -= int64(n*resultCost + b)
	clear(ss.results[:n]) // the array keeps them until append moves it
	ss.results = ss.results[n:]
}

// evict removes the least recently active sessions while the table holds
// more memory than its bound, but not keep, the most recently active.
func (t *sessionTable) evict(keep *session) {
	for t.mem > t.lim.memory && t.head != keep {
		t.remove(t.head)
	}
}

// touch sets ss's active time to the clock, which makes it the most
// recently active session.
func (t *sessionTable) touch(ss *session) {
	ss.active = t.clock
	t.unlink(ss)
	t.pushBack(ss)
}

// remove removes ss from the table.
func (t *sessionTable) remove(ss *session) {
	t.unlink(ss)
	delete(t.byID, ss.id)
	t.mem -= sessionCost + int64(len(ss.results))*resultCost + int64(ss.bytes)
}

// pushBack links ss, which is in no list, at the tail of the table's.
func (t *sessionTable) pushBack(ss *session) {
	ss.prev = t.tail
	if t.tail == nil {
		t.head = ss
	} else {
		t.tail.next = ss
	}
	t.tail = ss
}

// unlink takes ss, which is in the table's list, out of it.
func (t *sessionTable) unlink(ss *session) {
	if ss.prev == nil {
		t.head = ss.next
	} else {
		ss.prev.next = ss.next
	}
	if ss.next == nil {
		t.tail = ss.prev
	} else {
		ss.next.prev = ss.prev
	}
	ss.prev, ss.next = nil, nil
}
