package store

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzApply feeds arbitrary bytes to Apply: it must never panic, must
// reject what does not decode, and an OpSeq, which needs the entry it wraps
// after it, with ErrBadEntry and change nothing then, must fail the other
// session ops, which need a stamp, with ErrNoStamp, and what decodes must
// survive re-encoding. (Over-long varints decode, so the re-encoding may be
// shorter than the input.)
func FuzzApply(f *testing.F) {
	f.Add(AppendEntry(nil, OpSet, SetGet, []byte("k"), []byte("v")))
	f.Add(AppendEntry(nil, OpMSet, 0, []byte("a"), []byte("1"), []byte("b"), []byte("2")))
	f.Add(AppendEntry(nil, OpIncrBy, 0, []byte("n"), DeltaArg(-5)))
	f.Add(AppendEntry(nil, OpCAS, 0, []byte("k"), []byte("v"), []byte("w")))
	f.Add(AppendEntry(nil, OpDel, 0, []byte("k")))
	f.Add(AppendEntry(nil, OpFlush, 0))
	f.Add([]byte{EntryVersion, byte(OpSet), 0, 2, 1, 'k'})
	f.Add(AppendEntry(nil, OpSessionOpen, 0))
	f.Add(AppendEntry(nil, OpSeq, 0, Uint64Arg(1), Uint64Arg(2), Uint64Arg(3)))
	f.Add(AppendEntry(nil, OpSessionClose, 0, Uint64Arg(1)))
	f.Add(AppendEntry(nil, OpSetRange, 0, []byte("n"), Uint64Arg(3), []byte("v")))
	f.Add(AppendEntry(nil, OpBitField, 0, []byte("n"), BitfieldOp{Kind: BitfieldIncr, Bits: 7, Offset: 5, Value: 9}.Arg()))
	f.Add(AppendEntry(nil, OpBitOp, BitXor, []byte("d"), []byte("n"), []byte("n")))
	f.Add(AppendEntry(nil, OpIncrByFloat, 0, []byte("n"), []byte("1.5")))
	f.Add(txEntry(f, []watched{{"n", 0}}, "set k v", "read k n", "incr n 1"))
	f.Add(txEntry(f, nil, "seq 1 1 1", "set k v"))
	f.Add(AppendEntry(nil, OpRead, 0, []byte("n")))
	f.Fuzz(func(t *testing.T, b []byte) {
		s := New(Options{Stripes: 4, MaxValue: 1 << 10})
		s.Apply(AppendEntry(nil, OpSet, 0, []byte("n"), []byte("1")))
		r, err := s.Apply(b)
		// Apply refuses what a batch of b alone would be refused for: also
		// an OpSeq, which wraps the entry after it.
		if cerr := CheckBatch(batchOf(b)); (err == nil) != (cerr == nil) {
			t.Fatalf("Apply error %v but CheckBatch error %v", err, cerr)
		}
		e, derr := decodeEntry(b, nil)
		if err == nil && e.op.session() && r.Err != ErrNoStamp {
			t.Fatalf("Apply of session op %d gave %+v, want ErrNoStamp", e.op, r)
		}
		if err != nil {
			if !errors.Is(err, ErrBadEntry) {
				t.Fatalf("error %v does not wrap ErrBadEntry", err)
			}
			if v, ok := s.Get([]byte("n")); !ok || string(v) != "1" || s.Len() != 1 {
				t.Fatal("a rejected entry changed the store")
			}
			return
		}
		if derr != nil {
			t.Fatalf("Apply took an entry that does not decode: %v", derr)
		}
		re := AppendEntry(nil, e.op, e.flags, e.args...)
		e2, err := decodeEntry(re, nil)
		if err != nil || e2.op != e.op || e2.flags != e.flags || len(e2.args) != len(e.args) {
			t.Fatalf("entry %x re-encodes as %x: %+v, %v", b, re, e2, err)
		}
		for i := range e.args {
			if !bytes.Equal(e.args[i], e2.args[i]) {
				t.Fatalf("argument %d changed in re-encoding", i)
			}
		}
	})
}

// FuzzRestoreSessions feeds arbitrary bytes to RestoreSessions: it must
// never panic, must refuse what it does not take with ErrBadSessions and
// change nothing then, and a table it takes must keep the table's
// invariants, encode to a fixed point (over-long varints decode, so the
// first encoding may be shorter than the input), and take session ops,
// which bring it back within the bounds if it is over them.
func FuzzRestoreSessions(f *testing.F) {
	seed := New(Options{})
	applyCmds(f, seed, Stamp{Index: 1, Time: 10}, "open", "open", "set k v")
	f.Add(seed.Sessions())
	applyCmds(f, seed, Stamp{Index: 2, Time: 20}, "seq @1 3 2", "getset k w", "seq @1 4 2", "incr k 1", "seq @1.1 0 0", "set k x")
	f.Add(seed.Sessions())
	f.Add([]byte{SessionsVersion})
	opt := Options{MaxSessions: 3, MaxSessionResults: 2, MaxSessionBytes: 8}
	f.Fuzz(func(t *testing.T, b []byte) {
		s := New(opt)
		applyCmds(t, s, Stamp{Index: 1, Time: 1}, "open")
		before := s.Sessions()
		if err := s.RestoreSessions(b); err != nil {
			if !errors.Is(err, ErrBadSessions) {
				t.Fatalf("error %v does not wrap ErrBadSessions", err)
			}
			if !bytes.Equal(s.Sessions(), before) {
				t.Fatal("a refused table changed the store's")
			}
			return
		}
		checkSessions(t, &s.sessions.t)
		enc := s.Sessions()
		c := New(opt)
		if err := c.RestoreSessions(enc); err != nil || !bytes.Equal(c.Sessions(), enc) {
			t.Fatalf("the encoding of a restored table: %v, or encodes differently", err)
		}
		tb := &s.sessions.t
		id := uint64(1)
		if tb.tail != nil {
			id = tb.tail.id
		}
		res := applyAt(t, s, Stamp{Index: tb.lastID>>openBits + 1, Time: tb.clock}, batchOf(
			AppendEntry(nil, OpSeq, 0, Uint64Arg(id), Uint64Arg(1), Uint64Arg(0)),
			AppendEntry(nil, OpSet, SetGet, []byte("k"), []byte("a value longer than the bound")),
			cmdOf(t, "open")))
		checkSessions(t, tb)
		if res[2].Err == nil && len(tb.byID) > 3 {
			t.Fatalf("%d sessions after an open, over the bound", len(tb.byID))
		}
	})
}

// FuzzRestoreWatches feeds arbitrary bytes to RestoreWatches: it must
// never panic, must refuse what it does not take with ErrBadWatches and
// change nothing then, and a table it takes must encode to a fixed point.
func FuzzRestoreWatches(f *testing.F) {
	seed := New(Options{Stripes: 1})
	applyCmds(f, seed, Stamp{Index: 7}, "set a 1", "flush", "set b 2")
	f.Add(seed.Watches())
	f.Add([]byte{WatchVersion, 0, 0, 0})
	empty := New(Options{Stripes: 1}).Watches()
	f.Fuzz(func(t *testing.T, b []byte) {
		s := New(Options{Stripes: 1})
		if err := s.RestoreWatches(b); err != nil {
			if !errors.Is(err, ErrBadWatches) {
				t.Fatalf("error %v does not wrap ErrBadWatches", err)
			}
			if !bytes.Equal(s.Watches(), empty) {
				t.Fatal("a refused table changed the store's")
			}
			return
		}
		enc := s.Watches()
		r := New(Options{Stripes: 1})
		if err := r.RestoreWatches(enc); err != nil || !bytes.Equal(r.Watches(), enc) {
			t.Fatalf("a restored table does not encode to a fixed point: %v", err)
		}
	})
}
