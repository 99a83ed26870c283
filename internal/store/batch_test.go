package store

import (
	"errors"
	"testing"
)

func TestApplyBatchInOrder(t *testing.T) {
	s := New(Options{})
	var b Batch
	b.Add(OpSet, 0, []byte("k"), []byte("1"))
	b.Add(OpIncrBy, 0, []byte("k"), DeltaArg(41))
	b.Add(OpSet, SetGet, []byte("k"), []byte("x"))
	b.Add(OpDel, 0, []byte("k"), []byte("missing"))
	if b.Len() != 4 {
		t.Fatalf("Len = %d, want 4", b.Len())
	}
	var res []Result
	err := s.ApplyBatch(b.Bytes(), func(i int, r Result) {
		if i != len(res) {
			t.Fatalf("result %d came as number %d", i, len(res))
		}
		if i == 0 { // the callback runs between entries: the next has not taken effect
			if v, _ := s.Get([]byte("k")); string(v) != "1" {
				t.Fatalf("after entry 0, k = %q", v)
			}
		}
		res = append(res, r)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 4 || !res[0].Done || res[1].Int != 42 || string(res[2].Val) != "42" || res[3].Int != 1 {
		t.Fatalf("results = %+v", res)
	}
	b.Reset()
	if b.Len() != 0 || len(b.Bytes()) != 0 {
		t.Fatal("Reset left entries")
	}
}

func TestApplyBatchMalformedChangesNothing(t *testing.T) {
	s := New(Options{})
	var b Batch
	b.Add(OpSet, 0, []byte("a"), []byte("1"))
	good := append([]byte(nil), b.Bytes()...)
	for _, bad := range [][]byte{
		append(append([]byte(nil), good...), 5, 1, 2),    // overrun
		append(append([]byte(nil), good...), 3, 9, 9, 9), // bad entry version
		append(append([]byte(nil), good...), 0x80),       // truncated varint
	} {
		if err := s.ApplyBatch(bad, nil); !errors.Is(err, ErrBadEntry) {
			t.Fatalf("ApplyBatch(%x) = %v, want ErrBadEntry", bad, err)
		}
		if s.Len() != 0 {
			t.Fatalf("malformed batch %x applied its first entry", bad)
		}
	}
}

// TestAddSize checks AddSize against what Add appends, across the lengths
// where a varint gains a byte.
func TestAddSize(t *testing.T) {
	var b Batch
	for _, n := range []int{0, 1, 127, 128, 16383, 16384, 1 << 21} {
		for _, args := range [][][]byte{
			nil,
			{make([]byte, n)},
			{[]byte("k"), make([]byte, n)},
			make([][]byte, n%200), // many empty arguments
		} {
			before := len(b.Bytes())
			b.Add(OpMSet, SetNX, args...)
			if got, want := AddSize(args...), len(b.Bytes())-before; got != want {
				t.Fatalf("AddSize of %d args (longest %d) = %d, Add appended %d", len(args), n, got, want)
			}
		}
	}
}
