package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// SessionsVersion is the version of the session table encoding that
// Sessions writes.
const SessionsVersion = 4

// ErrBadSessions means an encoded session table could not be decoded: it
// is damaged, or from an unknown version.
var ErrBadSessions = errors.New("store: malformed session table")

// The session table, as Sessions encodes it:
//
//	+---------+-------+---------+----------------+----------------------+
//	| version | clock | last id | count uvarint  | count x session      |
//	+---------+-------+---------+----------------+----------------------+
//	  1 byte    8 B     8 B
//
// version is SessionsVersion; clock is the session clock, an int64 (Unix
// nanoseconds), and last id the last client id issued, 0 for none; the
// fixed-size integers are big-endian, and the uvarints as in
// encoding/binary. The sessions come from the least to the most recently
// active, each:
//
//	+----+--------+---------------+------------------+---------------------+
//	| id | active | floor uvarint | results uvarint  | results x result    |
//	+----+--------+---------------+------------------+---------------------+
//	  8 B  8 B
//
// with active, the clock when it was last used, an int64. Its kept results
// come in ascending seq, each:
//
//	+-------------+--------+
//	| seq uvarint | result |
//	+-------------+--------+
//
// and each result:
//
//	+-------+-----+-----+----------------------+----------------------------+
//	| flags | err | int | val len uvarint, val | sub uvarint, sub x result  |
//	+-------+-----+-----+----------------------+----------------------------+
//	  1 B     1 B   8 B   if flags has          if flags has resultSub
//	                      resultVal
//
// flags has resultDone, resultFound, resultVal (Val is not nil, maybe
// empty) and resultSub (Sub is not nil: an OpExec's, whose results may
// have Subs of their own, an OpRead's; at most maxSubDepth levels); err is
// 0 for none, else the place of Result.Err in resultErrs; int is
// Result.Int. From version 2 on, the slot-move records follow the last
// session (see appendMoves), and from version 4 on the slot-move fence
// after them; in version 1 nothing does, and there are none (and the
// fence of versions 1 to 3 is 0). Version 3 is version 4 without the
// fence. Versions 1 and 2 kept only single writes' results: they are
// version 3 with no resultSub and the errors of resultErrs up to
// ErrTooLarge. RestoreSessions reads all four, and refuses a table that
// breaks the invariants of sessionTable and session: ids are not 0,
// unique, and, those the group issued (whose low 16 bits are its id; all,
// in a store of group 0), at most last id; active times at most the clock
// and in order; seqs ascending, at least their session's floor and below
// 2^64-1; slot-move records in order, disjoint, and of known phases.
//
// ExportSessions encodes some of the sessions the same way, with no
// records, for OpSessionsImport: the ids there may be above last id.

// The flags of a kept result.
const (
	resultDone  = 1 << 0
	resultFound = 1 << 1
	resultVal   = 1 << 2
	resultSub   = 1 << 3
)

// maxSubDepth is how deep sub-results nest in a kept result: an OpExec's
// results, and those of its OpReads and OpDeadlines.
const maxSubDepth = 2

// resultErrs are the errors a kept result may hold: the ones writes fail
// with, and a transaction's entries (a nested OpSeq's session errors). An
// error's code in the encoding is its place here: new ones go at the end.
var resultErrs = [...]error{nil, ErrNotInteger, ErrOverflow, ErrTooLarge,
	ErrNoSuchKey, ErrNotFloat, ErrNaN, ErrSessionExpired, ErrStaleSequence, ErrNoStamp}

// Sessions returns the session table, encoded as drawn above, in a new
// slice. It may be called from any goroutine; to be consistent with a
// Snapshot, call both on the apply thread between two batches.
func (s *Store) Sessions() []byte {
	s.sessions.Lock()
	defer s.sessions.Unlock()
	t := &s.sessions.t
	return appendMoves(t.appendTo(nil, t.head, len(t.byID), (*session).nextOne), s.SlotMoves(), s.moves.fence)
}

// RestoreSessions replaces the session table with b, one that Sessions
// encoded. If the table is over the bounds of the store's Options, session
// ops bring it back within them as they come. A damaged b returns an error
// wrapping ErrBadSessions and changes nothing. The store does not retain
// b. Call it between two batches, as Sessions.
func (s *Store) RestoreSessions(b []byte) error {
	s.sessions.Lock()
	defer s.sessions.Unlock()
	t, ms, fence, err := decodeTable(b, s.sessions.t.lim, false)
	if err != nil {
		return err
	}
	s.sessions.t = t
	s.moves.p.Store(&ms)
	s.moves.fence = fence
	return nil
}

// appendTo appends to b the encoding of the table with its n sessions from
// first on, each after the one next returns (nil after the last), from
// the least to the most recently active; without the slot-move records.
func (t *sessionTable) appendTo(b []byte, first *session, n int, next func(*session) *session) []byte {
	b = append(b, SessionsVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(t.clock))
	b = binary.BigEndian.AppendUint64(b, t.lastID)
	b = binary.AppendUvarint(b, uint64(n))
	for ss := first; ss != nil; ss = next(ss) {
		b = binary.BigEndian.AppendUint64(b, ss.id)
		b = binary.BigEndian.AppendUint64(b, uint64(ss.active))
		b = binary.AppendUvarint(b, ss.floor)
		b = binary.AppendUvarint(b, uint64(len(ss.results)))
		for _, k := range ss.results {
			b = appendKept(b, k)
		}
	}
	return b
}

// appendKept appends the encoding of k to b.
func appendKept(b []byte, k kept) []byte {
	return appendResult(binary.AppendUvarint(b, k.seq), k.res)
}

// appendResult appends the encoding of a kept result, res, to b.
func appendResult(b []byte, res Result) []byte {
	var flags byte
	if res.Done {
		flags |= resultDone
	}
	if res.Found {
		flags |= resultFound
	}
	if res.Val != nil {
		flags |= resultVal
	}
	if res.Sub != nil {
		flags |= resultSub
	}
	b = append(b, flags, errCode(res.Err))
	b = binary.BigEndian.AppendUint64(b, uint64(res.Int))
	if res.Val != nil {
		b = binary.AppendUvarint(b, uint64(len(res.Val)))
		b = append(b, res.Val...)
	}
	if res.Sub != nil {
		b = binary.AppendUvarint(b, uint64(len(res.Sub)))
		for _, r := range res.Sub {
			b = appendResult(b, r)
		}
	}
	return b
}

// errCode returns err's code in the encoding.
func errCode(err error) byte {
	for i, e := range resultErrs {
		if e == err {
			return byte(i)
		}
	}
	panic(fmt.Sprintf("store: a session kept a result with error %v, which resultErrs lacks", err))
}

// decodeTable decodes a session table of version 1 to 4 (Sessions, or
// ExportSessions if exported), with bounds lim, and its slot-move records
// and fence.
func decodeTable(b []byte, lim sessionLimits, exported bool) (sessionTable, []SlotMove, uint64, error) {
	d := decoder{b: b, size: len(b)}
	v := d.byte()
	if d.err == nil && (v < 1 || v > SessionsVersion) {
		return sessionTable{}, nil, 0, fmt.Errorf("%w: version %d, not 1 to %d", ErrBadSessions, v, SessionsVersion)
	}
	t := newSessionTable(lim)
	t.clock = int64(d.uint64())
	t.lastID = d.uint64()
	n := d.uvarint()
	for i := uint64(0); i < n && d.err == nil; i++ { // each session takes bytes: the loop ends with b
		if ss := d.session(); d.err == nil {
			d.err = t.admit(ss, exported)
		}
	}
	var ms []SlotMove
	var fence uint64
	if v >= 2 {
		ms = d.moves()
	}
	if v >= 4 {
		fence = d.uvarint()
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("bytes after the last session: %d", len(d.b))
	}
	return t, ms, fence, d.err
}

// admit adds ss to t as its most recently active session, or returns an
// error wrapping ErrBadSessions if that would break t's invariants; of an
// exported table, whose ids may be above its last id.
func (t *sessionTable) admit(ss *session, exported bool) error {
	switch {
	case ss.id == 0 || !exported && t.issued(ss.id) && ss.id > t.lastID:
		return fmt.Errorf("%w: client id %d is 0 or above the last one issued, %d", ErrBadSessions, ss.id, t.lastID)
	case t.byID[ss.id] != nil:
		return fmt.Errorf("%w: client id %d is there twice", ErrBadSessions, ss.id)
	case ss.active > t.clock || (t.tail != nil && ss.active < t.tail.active):
		return fmt.Errorf("%w: client %d: active time %d is past the clock, %d, or before the previous session's", ErrBadSessions, ss.id, ss.active, t.clock)
	}
	t.byID[ss.id] = ss
	t.mem += sessionCost + int64(len(ss.results))*resultCost + int64(ss.bytes)
	t.pushBack(ss)
	return nil
}

// decoder reads an encoded session table of size bytes. Its methods
// return zero values once it has failed, and it keeps the first error.
type decoder struct {
	b    []byte // what is left to read
	size int
	err  error
}

func (d *decoder) fail(format string, a ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: at byte %d: %s", ErrBadSessions, d.size-len(d.b), fmt.Sprintf(format, a...))
	}
}

func (d *decoder) byte() byte {
	if d.err != nil || len(d.b) < 1 {
		d.fail("truncated")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uint64() uint64 {
	if d.err != nil || len(d.b) < 8 {
		d.fail("truncated")
		return 0
	}
	x := binary.BigEndian.Uint64(d.b)
	d.b = d.b[8:]
	return x
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	x, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad or truncated varint")
		return 0
	}
	d.b = d.b[n:]
	return x
}

// bytes returns a copy of the next n bytes.
func (d *decoder) bytes(n uint64) []byte {
	if d.err != nil || n > uint64(len(d.b)) {
		d.fail("a value of %d bytes overruns the table", n)
		return nil
	}
	v := append(make([]byte, 0, n), d.b[:n]...)
	d.b = d.b[n:]
	return v
}

// session decodes one session, checking its results.
func (d *decoder) session() *session {
	ss := &session{id: d.uint64(), active: int64(d.uint64()), floor: d.uvarint()}
	n := d.uvarint()
	for j := uint64(0); j < n && d.err == nil; j++ { // each result takes bytes
		k := d.kept()
		switch {
		case d.err != nil:
		case k.seq < ss.floor || k.seq == math.MaxUint64:
			d.fail("client %d: seq %d is below the floor, %d, or 2^64-1", ss.id, k.seq, ss.floor)
		case len(ss.results) > 0 && k.seq <= ss.results[len(ss.results)-1].seq:
			d.fail("client %d: seq %d is out of order", ss.id, k.seq)
		}
		ss.results = append(ss.results, k)
		ss.bytes += keptSize(k.res)
	}
	return ss
}

// kept decodes one kept result.
func (d *decoder) kept() kept {
	seq := d.uvarint()
	return kept{seq: seq, res: d.result(0)}
}

// result decodes a kept result, or a sub-result at depth.
func (d *decoder) result(depth int) Result {
	var res Result
	flags, code := d.byte(), d.byte()
	res.Int = int64(d.uint64())
	if flags&^(resultDone|resultFound|resultVal|resultSub) != 0 || int(code) >= len(resultErrs) {
		d.fail("result flags %#x or error code %d unknown", flags, code)
		return Result{}
	}
	if flags&resultSub != 0 && depth == maxSubDepth {
		d.fail("sub-results nested deeper than %d", maxSubDepth)
		return Result{}
	}
	res.Done, res.Found, res.Err = flags&resultDone != 0, flags&resultFound != 0, resultErrs[code]
	if flags&resultVal != 0 {
		res.Val = d.bytes(d.uvarint())
	}
	if flags&resultSub != 0 {
		n := d.uvarint()
		res.Sub = []Result{}
		for i := uint64(0); i < n && d.err == nil; i++ { // each takes bytes: the loop ends with b
			res.Sub = append(res.Sub, d.result(depth+1))
		}
	}
	return res
}
