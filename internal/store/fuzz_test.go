package store

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzApply feeds arbitrary bytes to Apply: it must never panic, must
// reject what does not decode with ErrBadEntry and change nothing then, and
// what decodes must survive re-encoding. (Over-long varints decode, so the
// re-encoding may be shorter than the input.)
func FuzzApply(f *testing.F) {
	f.Add(AppendEntry(nil, OpSet, SetGet, []byte("k"), []byte("v")))
	f.Add(AppendEntry(nil, OpMSet, 0, []byte("a"), []byte("1"), []byte("b"), []byte("2")))
	f.Add(AppendEntry(nil, OpIncrBy, 0, []byte("n"), DeltaArg(-5)))
	f.Add(AppendEntry(nil, OpCAS, 0, []byte("k"), []byte("v"), []byte("w")))
	f.Add(AppendEntry(nil, OpDel, 0, []byte("k")))
	f.Add(AppendEntry(nil, OpFlush, 0))
	f.Add([]byte{EntryVersion, byte(OpSet), 0, 2, 1, 'k'})
	f.Fuzz(func(t *testing.T, b []byte) {
		s := New(Options{Stripes: 4, MaxValue: 1 << 10})
		s.Apply(AppendEntry(nil, OpSet, 0, []byte("n"), []byte("1")))
		_, err := s.Apply(b)
		e, derr := decodeEntry(b, nil)
		if (err == nil) != (derr == nil) {
			t.Fatalf("Apply error %v but decode error %v", err, derr)
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
