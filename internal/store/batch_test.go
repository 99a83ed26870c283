package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
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

// TestApplyBatchMalformedChangesNothing checks that a batch with a
// malformed entry is refused whole, whether the entry comes in the first
// run of entries that ApplyBatch decodes and prefetches or after it (a
// batch of more than PrefetchKeys keys).
func TestApplyBatchMalformedChangesNothing(t *testing.T) {
	s := New(Options{})
	var b Batch
	b.Add(OpSet, 0, []byte("a"), []byte("1"))
	good := append([]byte(nil), b.Bytes()...)
	var long Batch
	for i := range 3 * PrefetchKeys {
		long.Add(OpSet, 0, fmt.Appendf(nil, "k%d", i), []byte("1"))
	}
	for _, bad := range [][]byte{
		append(append([]byte(nil), long.Bytes()...), 3, 9, 9, 9), // bad version, past the first run
		append(append([]byte(nil), good...), 5, 1, 2),            // overrun
		append(append([]byte(nil), good...), 3, 9, 9, 9),         // bad entry version
		append(append([]byte(nil), good...), 0x80),               // truncated varint
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

// TestApplyBatchLongBatches applies random batches of up to 300 entries,
// some with a hundred keys, which ApplyBatch takes a few entries at a time
// (see prefetch), and checks that every entry takes effect once, in order,
// with the result and the store Apply gives entry by entry; with full
// hashes, and with hashes cut so short that most keys clash.
func TestApplyBatchLongBatches(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, seed>>32|1))
	keys := make([][]byte, 500)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key%d", i)
	}
	key := func() []byte { return keys[rng.IntN(len(keys))] }
	for _, hashBits := range []int{0, 6} { // 6 bits: most keys clash (see clash)
		opt := Options{Stripes: 4, hashBits: hashBits}
		batched, single := New(opt), New(opt)
		for range 50 {
			var b Batch
			var entries [][]byte
			for range rng.IntN(300) {
				var args [][]byte
				op := []Op{OpSet, OpSet, OpMSet, OpDel, OpIncrBy, OpFlush}[rng.IntN(6)]
				switch op {
				case OpSet:
					args = [][]byte{key(), fmt.Append(nil, rng.IntN(100))}
				case OpMSet:
					for range 1 + rng.IntN(100) {
						args = append(args, key(), fmt.Append(nil, rng.IntN(100)))
					}
				case OpDel:
					for range 1 + rng.IntN(100) {
						args = append(args, key())
					}
				case OpIncrBy:
					args = [][]byte{key(), DeltaArg(1)}
				case OpFlush:
					if rng.IntN(20) > 0 {
						continue
					}
				}
				b.Add(op, 0, args...)
				entries = append(entries, AppendEntry(nil, op, 0, args...))
			}
			var got []Result
			err := batched.ApplyBatch(b.Bytes(), func(i int, r Result) {
				if i != len(got) {
					t.Fatalf("result %d came as number %d", i, len(got))
				}
				got = append(got, r)
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(entries) {
				t.Fatalf("%d results for %d entries", len(got), len(entries))
			}
			for i, e := range entries {
				want, err := single.Apply(e)
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(got[i]) != fmt.Sprint(want) {
					t.Fatalf("entry %d: ApplyBatch gave %+v, Apply %+v", i, got[i], want)
				}
			}
		}
		if batched.Len() != single.Len() {
			t.Fatalf("Len %d after ApplyBatch, %d after Apply", batched.Len(), single.Len())
		}
		for _, k := range keys {
			a, aok := batched.Get(k)
			b, bok := single.Get(k)
			if string(a) != string(b) || aok != bok {
				t.Fatalf("key %s: %q (%v) after ApplyBatch, %q (%v) after Apply", k, a, aok, b, bok)
			}
		}
	}
}

// TestApplyBatchAllocations checks that applying a batch allocates what its
// writes store and nothing per batch: a SET that overwrites a key whose
// cell no view holds allocates its value alone. A log applies a batch for
// each client's pipeline, or for each write of an unpipelined client, so a
// cost per batch is a cost per write there.
func TestApplyBatchAllocations(t *testing.T) {
	s := New(Options{})
	for _, n := range []int{1, 3 * PrefetchKeys} {
		var b Batch
		for i := range n {
			b.Add(OpSet, 0, fmt.Appendf(nil, "key%d", i), []byte("value"))
		}
		if err := s.ApplyBatch(b.Bytes(), nil); err != nil { // every key now has a cell
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(100, func() {
			if err := s.ApplyBatch(b.Bytes(), nil); err != nil {
				t.Fatal(err)
			}
		})
		// The race detector's pool drops a quarter of what it is given:
		// half an allocation a batch is allowed for that.
		if allocs > float64(n)+0.5 {
			t.Errorf("a batch of %d SETs of existing keys: %v allocations, want %d (the values)", n, allocs, n)
		}
	}
}
