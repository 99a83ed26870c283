package store

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	keyslot "github.com/flintkv/flint/internal/slot"
)

// # Slot moves
//
// A sharded cluster moves a range of hash slots from one group (the
// source) to another (the target) through both groups' logs, so that every
// replica of each knows where the move stands whatever fails (the steps,
// and who takes them: docs/SHARDING.md). The store keeps, for each slot
// range it takes part in a move of, a SlotMove record: its Phase and its
// peer, the other group. The ops that set them:
//
//	OpSlotsLeave   source: Leaving; writes to the slots are refused from here on
//	OpSlotsGone    source: Gone; every key has been copied to the target
//	OpSlotsDrop    source: delete the slots' keys; Dropped (or no record, epoch 0)
//	OpSlotsImport  target: Importing; put the keys it carries, with their deadlines
//	OpSessionsImport target: merge sessions copied from the source
//	OpSlotsOpen    target: Open; the target serves the slots
//	OpSlotsStay    source: no record; a move given up before Gone, writes served again
//
// A write to a key of a slot whose record is Leaving, Gone, Dropped or
// Importing is refused with ErrSlotMoving and changes nothing, so that no
// write lands on a group after its keys were copied away, or before they
// all arrived. Records stay until a later move of the same slots replaces
// them (a Dropped one tells a node whose map is older than its Epoch where
// the slots went); they are saved with the session table (Sessions).
//
// The managers that take the steps are fenced by their meta group's raft
// term: the leader that takes them sends each wrapped in OpSlotsFenced
// with the term it leads in. The store keeps the highest term of those it
// applied, its fence, and refuses (changes nothing) one of a lower term: a
// step that a deposed leader sent late, once its successor has taken a
// step here. Unwrapped steps (a manager that keeps its map in memory, the
// only one that takes steps) pass no fence. The fence is saved with the
// records (session table version 4).

// Phase is where a slot range's move stands in one group.
type Phase byte

// The phases of a move, in the source (Leaving, Gone, Dropped) and in the
// target (Importing, Open).
const (
	Leaving   Phase = 1 // writes refused; reads served
	Gone      Phase = 2 // every key copied to the peer: nothing is served here
	Dropped   Phase = 3 // keys deleted; the map gives the slots to the peer from Epoch on
	Importing Phase = 4 // keys arriving from the peer: nothing is served here
	Open      Phase = 5 // every key arrived and the source is Gone: served here
)

// SlotMove is the record of one slot range's move in a group.
type SlotMove struct {
	First, Last int // slots, both included
	Phase       Phase
	Peer        uint64 // the other group: the target in the source, the source in the target
	Epoch       uint64 // Dropped: the epoch of the map that gives the slots to Peer
}

// ErrSlotMoving is the error of a write to a key of a slot that is moving
// (see SlotMove): it did not take effect; retry it where the slot goes.
var ErrSlotMoving = errors.New("store: the key's slot is moving to another group")

// The slot-move ops (see the package doc on slot moves). Their slots and
// groups are 8-byte arguments (Uint64Arg).
const (
	OpSlotsLeave     Op = 70 // args: first, last, peer
	OpSlotsGone      Op = 71 // args: first, last, peer
	OpSlotsDrop      Op = 72 // args: first, last, peer, epoch
	OpSlotsImport    Op = 73 // args: first, last, peer, then key, value, deadline (DeadlineArg; 0 for none), ...
	OpSessionsImport Op = 74 // args: sessions, as ExportSessions encodes them
	OpSlotsOpen      Op = 75 // args: first, last, peer
	OpSlotsStay      Op = 76 // args: first, last, peer
	// OpSlotsFenced wraps one of the ops above. args: term, the op (1
	// byte), then that op's args.
	OpSlotsFenced Op = 103
)

// slotOp reports whether op is a slot-move op.
func (op Op) slotOp() bool { return op >= OpSlotsLeave && op <= OpSlotsStay || op == OpSlotsFenced }

// Fenced returns the entry arguments of OpSlotsFenced that wrap the
// slot-move op op, of arguments args, sent by a manager leading in term.
func Fenced(term uint64, op Op, args ...[]byte) [][]byte {
	return append([][]byte{Uint64Arg(term), {byte(op)}}, args...)
}

// checkSlotOp checks the arguments of a slot-move op.
func (e entry) checkSlotOp() bool {
	n := len(e.args)
	switch e.op {
	case OpSlotsFenced:
		if n < 2 || len(e.args[0]) != 8 || len(e.args[1]) != 1 {
			return false
		}
		in := entry{op: Op(e.args[1][0]), args: e.args[2:]}
		return in.op != OpSlotsFenced && in.op.slotOp() && in.checkSlotOp()
	case OpSessionsImport:
		return n == 1
	case OpSlotsDrop:
		if n != 4 || len(e.args[3]) != 8 {
			return false
		}
	case OpSlotsImport:
		if n < 3 || (n-3)%3 != 0 {
			return false
		}
		for i := 5; i < n; i += 3 {
			if len(e.args[i]) != 8 {
				return false
			}
		}
	default:
		if n != 3 {
			return false
		}
	}
	for _, a := range e.args[:3] {
		if len(a) != 8 {
			return false
		}
	}
	first, last := binary.BigEndian.Uint64(e.args[0]), binary.BigEndian.Uint64(e.args[1])
	return first <= last && last < keyslot.Count
}

// moves is the store's slot-move records. The apply goroutine changes
// them under the sessions mutex; readers load them without a lock.
type moves struct {
	p     atomic.Pointer[[]SlotMove] // in order of First, disjoint; nil or empty if none
	fence uint64                     // the highest term of an OpSlotsFenced applied; under the sessions mutex
}

// SlotMoves returns the slot-move records, in order of slot. The slice
// must not be modified.
func (s *Store) SlotMoves() []SlotMove {
	if p := s.moves.p.Load(); p != nil {
		return *p
	}
	return nil
}

// SlotMoveOf returns the record of slot sl's move, if it has one.
func (s *Store) SlotMoveOf(sl int) (SlotMove, bool) {
	return SlotMoveIn(s.SlotMoves(), sl)
}

// SlotMoveIn finds slot sl's record in ms, records as SlotMoves returns.
func SlotMoveIn(ms []SlotMove, sl int) (SlotMove, bool) {
	i, found := slices.BinarySearchFunc(ms, sl, func(m SlotMove, sl int) int {
		switch {
		case m.Last < sl:
			return -1
		case m.First > sl:
			return 1
		}
		return 0
	})
	if !found {
		return SlotMove{}, false
	}
	return ms[i], true
}

// refused reports whether the write e is refused: a key of it is in a
// slot whose record refuses writes. The removal of expired keys is not:
// they are gone to every read already, and the target has their deadlines.
func (s *Store) refused(e entry) bool {
	ms := s.SlotMoves()
	if len(ms) == 0 || e.op == OpExpireDue { // removing a key gone already changes nothing a read sees
		return false
	}
	keys, stride := e.keys()
	for i := 0; i < len(keys); i += stride {
		if m, ok := SlotMoveIn(ms, keyslot.Of(keys[i])); ok && m.Phase != Open {
			return true
		}
	}
	return false
}

// applySlotOp applies a slot-move op. Done says whether it changed
// anything: an op whose slots do not all have records it may follow
// (see follows) changes nothing, so that a step taken twice, or out of
// turn, is harmless.
func (s *Store) applySlotOp(e entry) Result {
	switch e.op {
	case OpSlotsFenced:
		return s.applyFenced(e)
	case OpSessionsImport:
		return s.importSessions(e.args[0])
	}
	rec := SlotMove{First: int(argUint64(e, 0)), Last: int(argUint64(e, 1)), Peer: argUint64(e, 2)}
	var from []Phase // the phases rec may follow; 0 is no record
	var act func()
	switch e.op {
	case OpSlotsLeave:
		rec.Phase, from = Leaving, []Phase{0, Leaving, Dropped, Open}
	case OpSlotsGone:
		rec.Phase, from = Gone, []Phase{Leaving, Gone}
	case OpSlotsOpen:
		rec.Phase, from = Open, []Phase{Importing, Open}
	case OpSlotsStay:
		from = []Phase{0, Leaving}
	case OpSlotsImport:
		rec.Phase, from = Importing, []Phase{0, Importing, Dropped}
		act = func() { s.importKeys(e.args[3:]) }
	case OpSlotsDrop:
		rec.Phase, rec.Epoch, from = Dropped, argUint64(e, 3), []Phase{Gone, Dropped}
		if rec.Epoch == 0 { // undo an import: no record
			rec.Phase, from = 0, []Phase{0, Importing, Dropped}
		}
		act = func() { s.dropSlots(rec.First, rec.Last) }
	}
	s.sessions.Lock()
	defer s.sessions.Unlock()
	old := s.SlotMoves()
	for sl := rec.First; sl <= rec.Last; sl++ {
		if m, _ := SlotMoveIn(old, sl); !follows(m, rec, from) {
			return Result{}
		}
	}
	if act != nil {
		act()
	}
	ms := cutMoves(old, rec.First, rec.Last)
	if rec.Phase != 0 {
		ms = append(ms, rec)
		slices.SortFunc(ms, func(a, b SlotMove) int { return cmp.Compare(a.First, b.First) })
	}
	s.moves.p.Store(&ms)
	return Result{Done: true}
}

// applyFenced applies OpSlotsFenced: the op it wraps, unless its term is
// below the store's fence, which it raises to its term. Done says whether
// the op it wraps changed anything.
func (s *Store) applyFenced(e entry) Result {
	term := argUint64(e, 0)
	s.sessions.Lock()
	late := term < s.moves.fence
	if !late {
		s.moves.fence = term
	}
	s.sessions.Unlock()
	if late {
		return Result{}
	}
	return s.applySlotOp(entry{op: Op(e.args[1][0]), args: e.args[2:]})
}

// SlotsFence returns the store's fence: the highest term of the
// OpSlotsFenced it applied, 0 if none.
func (s *Store) SlotsFence() uint64 {
	s.sessions.Lock()
	defer s.sessions.Unlock()
	return s.moves.fence
}

// follows reports whether a slot's record may become rec, now m: m's phase
// is one of from, and a move under way (Leaving, Gone, Importing) is the
// same move, with rec's peer.
func follows(m, rec SlotMove, from []Phase) bool {
	if !slices.Contains(from, m.Phase) {
		return false
	}
	switch m.Phase {
	case Leaving, Gone, Importing:
		return m.Peer == rec.Peer
	}
	return true
}

// cutMoves returns a new slice of the records of ms with the slots first
// to last taken out of them.
func cutMoves(ms []SlotMove, first, last int) []SlotMove {
	var out []SlotMove
	for _, m := range ms {
		if m.Last < first || m.First > last {
			out = append(out, m)
			continue
		}
		if m.First < first {
			l := m
			l.Last = first - 1
			out = append(out, l)
		}
		if m.Last > last {
			r := m
			r.First = last + 1
			out = append(out, r)
		}
	}
	return out
}

// importKeys puts the keys of args, triples of key, value and deadline
// (Unix ms, 0 for none), with their deadlines.
func (s *Store) importKeys(args [][]byte) {
	for i := 0; i+2 < len(args); i += 3 {
		key, at := args[i], int64(binary.BigEndian.Uint64(args[i+2]))
		st, h := s.locate(key)
		val := s.own(args[i+1])
		st.mu.Lock()
		st.putLocked(h, key, val)
		if at != 0 {
			st.setDeadlineLocked(key, at)
		} else {
			st.clearDeadlineLocked(key)
		}
		st.mu.Unlock()
	}
}

// dropSlots deletes every key in the slots first to last. It looks at
// every key of the store: a move costs a pass over the source's keys.
func (s *Store) dropSlots(first, last int) {
	var keys [][]byte
	s.Snapshot().Ascend(func(key string, _ []byte) bool {
		if sl := keyslot.Of([]byte(key)); sl >= first && sl <= last {
			keys = append(keys, []byte(key))
		}
		return true
	})
	for len(keys) > 0 {
		n := min(len(keys), 1024)
		s.del(keys[:n])
		keys = keys[n:]
	}
}

// SlotKeys calls fn for each pair after the key after (from the first
// with after empty), in key order, whose key is in the slots first to
// last, until fn returns false. It reads a Snapshot, and passes over every
// key of the store.
func (s *Store) SlotKeys(first, last int, after []byte, fn func(key string, val []byte) bool) {
	s.Snapshot().Ascend(func(key string, val []byte) bool {
		if len(after) > 0 && key <= string(after) {
			return true
		}
		if sl := keyslot.Of([]byte(key)); sl < first || sl > last {
			return true
		}
		return fn(key, val)
	})
}

// appendMoves appends the encoding of ms and fence, the records section
// of a session table of version 4: a uvarint count, then each record's
// first and last slot, peer and epoch as uvarints, and its phase as one
// byte after the slots; then the fence, a uvarint (versions 2 and 3 end
// before it: their fence is 0).
func appendMoves(b []byte, ms []SlotMove, fence uint64) []byte {
	b = binary.AppendUvarint(b, uint64(len(ms)))
	for _, m := range ms {
		b = binary.AppendUvarint(b, uint64(m.First))
		b = binary.AppendUvarint(b, uint64(m.Last))
		b = append(b, byte(m.Phase))
		b = binary.AppendUvarint(b, m.Peer)
		b = binary.AppendUvarint(b, m.Epoch)
	}
	return binary.AppendUvarint(b, fence)
}

// moves decodes a records section, checking that the records are in
// order, disjoint, of known phases and within the slots.
func (d *decoder) moves() []SlotMove {
	n := d.uvarint()
	var ms []SlotMove
	for i := uint64(0); i < n && d.err == nil; i++ { // each record takes bytes
		m := SlotMove{First: int(d.uvarint()), Last: int(d.uvarint())}
		m.Phase, m.Peer, m.Epoch = Phase(d.byte()), d.uvarint(), d.uvarint()
		switch {
		case d.err != nil:
		case m.First > m.Last || m.Last >= keyslot.Count || m.Phase < Leaving || m.Phase > Open:
			d.fail("slot move %d-%d of phase %d", m.First, m.Last, m.Phase)
		case len(ms) > 0 && m.First <= ms[len(ms)-1].Last:
			d.fail("slot moves out of order")
		}
		ms = append(ms, m)
	}
	return ms
}

// String names a phase, as FLINT.SLOTS STATUS shows it.
func (p Phase) String() string {
	switch p {
	case Leaving:
		return "leaving"
	case Gone:
		return "gone"
	case Dropped:
		return "dropped"
	case Importing:
		return "importing"
	case Open:
		return "open"
	}
	return fmt.Sprintf("phase(%d)", byte(p))
}

// nextOne returns the session after ss in the table's list.
func (ss *session) nextOne() *session { return ss.next }

// issued reports whether this group issued id: its low groupBits are the
// group's id, or the group is 0 (a store that is not sharded imports no
// sessions).
func (t *sessionTable) issued(id uint64) bool {
	return t.lim.group == 0 || id&maxGroup == t.lim.group
}

// ExportSessions encodes, for OpSessionsImport, up to n of the sessions
// whose ids are above after, those of the lowest ids, and no more than
// about maxBytes of them (but at least one), and returns the encoding and
// the highest id it holds (after if none): the cursor of the next call. A
// slot move copies every session of the source, since a session's kept
// results do not say which slots their writes were on.
func (s *Store) ExportSessions(after uint64, n, maxBytes int) ([]byte, uint64) {
	s.sessions.Lock()
	defer s.sessions.Unlock()
	t := &s.sessions.t
	var ids []uint64
	for id := range t.byID {
		if id > after {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var picked []*session
	size := 0
	for _, id := range ids[:min(n, len(ids))] {
		ss := t.byID[id]
		if size += 32 + 24*len(ss.results) + ss.bytes; len(picked) > 0 && size > maxBytes {
			break
		}
		picked = append(picked, ss)
	}
	ids = ids[:len(picked)]
	slices.SortStableFunc(picked, func(a, b *session) int { return cmp.Compare(a.active, b.active) })
	i := 0
	next := func(*session) *session {
		if i++; i < len(picked) {
			return picked[i]
		}
		return nil
	}
	var first *session
	if len(picked) > 0 {
		first = picked[0]
	}
	if len(ids) > 0 {
		after = ids[len(ids)-1]
	}
	return appendMoves(t.appendTo(nil, first, len(picked), next), nil, 0), after
}

// importSessions merges into the table the sessions that b, an
// ExportSessions encoding, holds: a session it does not have is added as
// the most recently active; one it has (a session that went to the other
// group and back) keeps the results of both, and the higher floor. The
// table's bounds then apply as to any session op. A b that does not
// decode changes nothing, and the result's Err says why.
func (s *Store) importSessions(b []byte) Result {
	s.sessions.Lock()
	defer s.sessions.Unlock()
	t := &s.sessions.t
	in, _, _, err := decodeTable(b, t.lim, true)
	if err != nil {
		return Result{Err: err}
	}
	for ss := in.head; ss != nil; {
		next := ss.next
		ss.prev, ss.next = nil, nil
		t.merge(ss)
		ss = next
	}
	return Result{Done: true}
}

// merge adds ss, a session of another table, to t, as its most recently
// active session.
func (t *sessionTable) merge(ss *session) {
	ss.active = t.clock
	own := t.byID[ss.id]
	if own == nil {
		for len(t.byID) >= t.lim.sessions {
			t.remove(t.head)
		}
		kept := ss.results
		ss.results, ss.bytes = nil, 0
		t.byID[ss.id] = ss
		t.mem += sessionCost
		t.pushBack(ss)
		own = ss
		ss = &session{floor: own.floor, results: kept}
	} else {
		t.touch(own)
	}
	t.ack(own, ss.floor)
	for _, k := range ss.results {
		t.keep(own.id, k.seq, k.res)
	}
	t.evict(own)
}
