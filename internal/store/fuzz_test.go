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
