package store

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	keyslot "github.com/flintkv/flint/internal/slot"
)

// slotEntry encodes a slot-move op on the slots first to last with peer,
// and more arguments after them.
func slotEntry(op Op, first, last int, peer uint64, more ...[]byte) []byte {
	args := append([][]byte{Uint64Arg(uint64(first)), Uint64Arg(uint64(last)), Uint64Arg(peer)}, more...)
	return AppendEntry(nil, op, 0, args...)
}

// TestSessionIDsInGroup checks that a sharded group's store issues ids
// with its group in the low bits, counting on from ids issued by index.
func TestSessionIDsInGroup(t *testing.T) {
	a, b := New(Options{Group: 1}), New(Options{Group: 2})
	for i := range uint64(3) {
		ra := applyAt(t, a, Stamp{Index: 5}, batchOf(cmdOf(t, "open")))[0]
		rb := applyAt(t, b, Stamp{Index: 5}, batchOf(cmdOf(t, "open")))[0]
		if ra.Int != int64((i+1)<<groupBits|1) || rb.Int != int64((i+1)<<groupBits|2) {
			t.Fatalf("open %d: ids %#x and %#x, want count<<16 | group", i, ra.Int, rb.Int)
		}
	}
	// A table restored from a store of group 0 goes on above its ids.
	old := New(Options{})
	applyCmds(t, old, Stamp{Index: 9}, "open")
	c := New(Options{Group: 3})
	if err := c.RestoreSessions(old.Sessions()); err != nil {
		t.Fatal(err)
	}
	if r := applyAt(t, c, Stamp{Index: 10}, batchOf(cmdOf(t, "open")))[0]; uint64(r.Int) != 10<<groupBits|3 {
		t.Fatalf("id %#x after an id of index 9, want %#x", r.Int, 10<<groupBits|3)
	}
}

// TestSlotMove moves one slot between two groups' stores as a move does
// (see slotmove.go): writes refused while it leaves, keys and sessions
// copied, a write retried at the target after it applied at the source
// answered from its kept result, not applied twice, and the records kept
// in the session table's encoding.
func TestSlotMove(t *testing.T) {
	a, b := New(Options{Group: 1}), New(Options{Group: 2})
	s := keyslot.Of([]byte("{m}"))
	id := uint64(applyAt(t, a, Stamp{Index: 1}, batchOf(cmdOf(t, "open")))[0].Int)
	seqWrite := func(st *Store, index, seq uint64, key string) Result {
		return applyAt(t, st, Stamp{Index: index}, batchOf(
			AppendEntry(nil, OpSeq, 0, Uint64Arg(id), Uint64Arg(seq), Uint64Arg(1)),
			AppendEntry(nil, OpIncrBy, 0, []byte(key), DeltaArg(1))))[1]
	}
	if r := seqWrite(a, 2, 1, "{m}n"); r.Int != 1 {
		t.Fatalf("first incr: %+v", r)
	}
	applyAt(t, a, Stamp{Index: 3}, batchOf(cmdOf(t, "set {m}k v"), cmdOf(t, "set other v")))

	applyAt(t, a, Stamp{Index: 4}, batchOf(slotEntry(OpSlotsLeave, s, s, 2)))
	if r := seqWrite(a, 5, 2, "{m}n"); !errors.Is(r.Err, ErrSlotMoving) {
		t.Fatalf("a write to a leaving slot gave %+v, want ErrSlotMoving", r)
	}
	if r := applyAt(t, a, Stamp{Index: 6}, batchOf(cmdOf(t, "set other w")))[0]; !r.Done {
		t.Fatalf("a write to another slot was refused: %+v", r)
	}
	if v, _ := a.Get([]byte("{m}n")); string(v) != "1" {
		t.Fatalf("{m}n = %q after a refused write", v)
	}

	// Copy the slot's keys and every session to b.
	var keys [][]byte // triples: key, value, deadline
	a.SlotKeys(s, s, nil, func(k string, v []byte) bool {
		at := int64(0)
		if k == "{m}k" {
			at = 1 << 50 // some deadline far ahead
		}
		keys = append(keys, []byte(k), v, DeadlineArg(at))
		return true
	})
	if len(keys) != 6 {
		t.Fatalf("SlotKeys gave %q, want {m}k and {m}n", keys)
	}
	sess, next := a.ExportSessions(0, 10, 1<<20)
	if next != id {
		t.Fatalf("ExportSessions cursor %d, want %d", next, id)
	}
	for _, r := range applyAt(t, b, Stamp{Index: 1}, batchOf(
		slotEntry(OpSlotsImport, s, s, 1, keys...),
		AppendEntry(nil, OpSessionsImport, 0, sess),
		slotEntry(OpSlotsOpen, s, s, 1))) {
		if !r.Done {
			t.Fatalf("b's import: %+v", r)
		}
	}
	if r := applyAt(t, b, Stamp{Index: 2}, batchOf(slotEntry(OpSlotsImport, s, s, 1, []byte("{m}k"), []byte("old"), DeadlineArg(0)))); r[0].Done {
		t.Fatal("an import into an open slot was applied")
	}
	applyAt(t, a, Stamp{Index: 7}, batchOf(slotEntry(OpSlotsGone, s, s, 2)))

	// The write applied at a, retried at b: its kept result, not applied again.
	if r := seqWrite(b, 3, 1, "{m}n"); r.Int != 1 {
		t.Fatalf("a retried write at the target gave %+v, want its kept result 1", r)
	}
	if r := seqWrite(b, 4, 2, "{m}n"); r.Int != 2 {
		t.Fatalf("the refused write, sent to the target, gave %+v, want 2", r)
	}
	if v, _ := b.Get([]byte("{m}k")); string(v) != "v" {
		t.Fatalf("{m}k at the target = %q", v)
	}
	if at, has, _ := b.TTL([]byte("{m}k")); !has || at != 1<<50 {
		t.Fatalf("{m}k's deadline at the target: %d, %v; want the one imported", at, has)
	}

	applyAt(t, a, Stamp{Index: 8}, batchOf(AppendEntry(nil, OpSlotsDrop, 0,
		Uint64Arg(uint64(s)), Uint64Arg(uint64(s)), Uint64Arg(2), Uint64Arg(9))))
	if _, ok := a.Get([]byte("{m}k")); ok || a.Len() != 1 {
		t.Fatalf("the source holds %d keys after the drop, want only 'other'", a.Len())
	}
	if m, ok := a.SlotMoveOf(s); !ok || m != (SlotMove{First: s, Last: s, Phase: Dropped, Peer: 2, Epoch: 9}) {
		t.Fatalf("the source's record: %+v", m)
	}

	// The records survive a snapshot of the session table.
	c := New(Options{Group: 1})
	if err := c.RestoreSessions(a.Sessions()); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.SlotMoves(), a.SlotMoves()) || !bytes.Equal(c.Sessions(), a.Sessions()) {
		t.Fatalf("restored records %+v, want %+v", c.SlotMoves(), a.SlotMoves())
	}
}

// TestSlotMoveSteps checks that a step that does not follow the slots'
// records changes nothing, and that records split as ranges are cut.
func TestSlotMoveSteps(t *testing.T) {
	a := New(Options{Group: 1})
	step := func(e []byte) bool { return applyAt(t, a, Stamp{Index: 1}, batchOf(e))[0].Done }
	if step(slotEntry(OpSlotsGone, 10, 20, 2)) {
		t.Fatal("Gone before Leaving was applied")
	}
	if !step(slotEntry(OpSlotsLeave, 10, 20, 2)) || step(slotEntry(OpSlotsGone, 10, 20, 3)) {
		t.Fatal("Leave, then Gone to another peer, was not refused")
	}
	if !step(slotEntry(OpSlotsGone, 15, 20, 2)) || step(slotEntry(OpSlotsLeave, 15, 15, 2)) {
		t.Fatal("Gone of part of the range, then Leave of it again, was not refused")
	}
	want := []SlotMove{{First: 10, Last: 14, Phase: Leaving, Peer: 2}, {First: 15, Last: 20, Phase: Gone, Peer: 2}}
	if !slices.Equal(a.SlotMoves(), want) {
		t.Fatalf("records %+v, want %+v", a.SlotMoves(), want)
	}
	// A move given up: only while leaving, not once gone.
	if step(slotEntry(OpSlotsStay, 10, 20, 2)) || !step(slotEntry(OpSlotsStay, 10, 14, 2)) {
		t.Fatal("Stay of slots gone was applied, or of slots leaving refused")
	}
	if want = want[1:]; !slices.Equal(a.SlotMoves(), want) {
		t.Fatalf("records %+v after Stay, want %+v", a.SlotMoves(), want)
	}
}

// TestSlotsFenced checks that a store takes a fenced step of a term at
// least its fence, and refuses (changing nothing) one of a lower term,
// after a restore from its session table too, and that an unfenced step
// passes no fence.
func TestSlotsFenced(t *testing.T) {
	fenced := func(term uint64, op Op, first, last int, peer uint64) []byte {
		args := [][]byte{Uint64Arg(uint64(first)), Uint64Arg(uint64(last)), Uint64Arg(peer)}
		return AppendEntry(nil, OpSlotsFenced, 0, Fenced(term, op, args...)...)
	}
	a := New(Options{Group: 1})
	if r := applyAt(t, a, Stamp{Index: 1}, batchOf(fenced(5, OpSlotsLeave, 10, 19, 2)))[0]; !r.Done {
		t.Fatalf("a step of term 5 at fence 0: %+v", r)
	}
	if r := applyAt(t, a, Stamp{Index: 2}, batchOf(fenced(7, OpSlotsStay, 10, 19, 2)))[0]; !r.Done {
		t.Fatalf("a step of term 7 at fence 5: %+v", r)
	}
	b := New(Options{Group: 1})
	if err := b.RestoreSessions(a.Sessions()); err != nil || b.SlotsFence() != 7 {
		t.Fatalf("restored: %v, fence %d, want 7", err, b.SlotsFence())
	}
	for _, st := range []*Store{a, b} {
		if r := applyAt(t, st, Stamp{Index: 3}, batchOf(fenced(5, OpSlotsLeave, 10, 19, 2)))[0]; r.Done || len(st.SlotMoves()) != 0 {
			t.Fatalf("a late step of term 5 at fence 7: %+v, records %v", r, st.SlotMoves())
		}
		if r := applyAt(t, st, Stamp{Index: 4}, batchOf(slotEntry(OpSlotsLeave, 10, 19, 2)))[0]; !r.Done || st.SlotsFence() != 7 {
			t.Fatalf("an unfenced step: %+v, fence %d", r, st.SlotsFence())
		}
	}
	bad := AppendEntry(nil, OpSlotsFenced, 0, Uint64Arg(9), []byte{byte(OpSlotsFenced)}, Uint64Arg(9), []byte{byte(OpSlotsLeave)})
	if err := a.ApplyBatchAt(batchOf(bad), Stamp{Index: 5}, func(int, Result) {}); !errors.Is(err, ErrBadEntry) {
		t.Fatalf("a fenced step wrapping a fenced step: %v, want ErrBadEntry", err)
	}
}
