package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/flintkv/flint/internal/zipf"
)

// The benchmark workload follows the users' YCSB setup (docs/BENCHMARKS.md):
// 1,000,000 records with keys "0" .. "999999", 128-byte values, key
// popularity Zipfian with theta 0.99 and key "0" the hottest, or uniform.
const (
	benchRecords = 1_000_000
	benchTheta   = 0.99
)

// benchData is loaded once per test binary and shared by the benchmarks:
// loading takes a few seconds. The SET benchmarks overwrite values with
// values of the same size, so every benchmark sees the same store shape.
var benchData struct {
	once sync.Once
	s    *Store
	keys [][]byte
	val  []byte
	zipf *zipf.Generator
}

func loadBench(b *testing.B) {
	benchData.once.Do(func() {
		keys := make([][]byte, benchRecords)
		for i := range keys {
			keys[i] = strconv.AppendInt(nil, int64(i), 10)
		}
		val := bytes.Repeat([]byte{'v'}, 128)
		s := New(Options{})
		var args [][]byte
		var e []byte
		for i := 0; i < benchRecords; i += 1000 {
			args = args[:0]
			for _, k := range keys[i:min(i+1000, benchRecords)] {
				args = append(args, k, val)
			}
			e = AppendEntry(e[:0], OpMSet, 0, args...)
			if _, err := s.Apply(e); err != nil {
				panic(err)
			}
		}
		benchData.s, benchData.keys, benchData.val = s, keys, val
		benchData.zipf = zipf.New(benchRecords, benchTheta)
		runtime.GC() // collect the loading garbage now, not inside the timed loop
	})
	if benchData.s.Len() != benchRecords {
		b.Fatalf("store has %d keys, want %d", benchData.s.Len(), benchRecords)
	}
}

// BenchmarkStore measures point operations on the state machine alone,
// from all cores (b.RunParallel: one goroutine per GOMAXPROCS):
// the YCSB-B mix of 95% GET and 5% SET, and SET alone, under Zipfian and
// uniform key popularity.
func BenchmarkStore(b *testing.B) {
	for _, dist := range []string{"zipfian", "uniform"} {
		b.Run("get95set5/"+dist, func(b *testing.B) { benchPoint(b, dist, 5) })
	}
	for _, dist := range []string{"zipfian", "uniform"} {
		b.Run("set/"+dist, func(b *testing.B) { benchPoint(b, dist, 100) })
	}
}

func benchPoint(b *testing.B, dist string, setPercent int) {
	loadBench(b)
	s, keys, val, z := benchData.s, benchData.keys, benchData.val, benchData.zipf
	var workers atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := workers.Add(1) // each worker seeds its own generator
		rng := rand.New(rand.NewPCG(w, 0x5eed))
		var e []byte
		for pb.Next() {
			var i int
			if dist == "zipfian" {
				i = z.Next(rng.Float64())
			} else {
				i = rng.IntN(benchRecords)
			}
			if setPercent == 100 || rng.IntN(100) < setPercent {
				e = AppendEntry(e[:0], OpSet, 0, keys[i], val)
				if _, err := s.Apply(e); err != nil {
					b.Error(err)
					return
				}
			} else if _, ok := s.Get(keys[i]); !ok {
				b.Errorf("key %q missing", keys[i])
				return
			}
		}
	})
}

// BenchmarkApplyBatch measures applying batches of 64 SETs of uniformly
// random keys, as a connection pipelining writes proposes them, from one
// goroutine, as the log's apply loop does. Its ns/op is per batch; write-ns
// is per SET.
func BenchmarkApplyBatch(b *testing.B) {
	loadBench(b)
	s, keys, val := benchData.s, benchData.keys, benchData.val
	rng := rand.New(rand.NewPCG(1, 2))
	batches := make([][]byte, 1024) // 64 Ki writes: built before timing
	for i := range batches {
		var bt Batch
		for range 64 {
			bt.Add(OpSet, 0, keys[rng.IntN(benchRecords)], val)
		}
		batches[i] = bt.Bytes()
	}
	for i := 0; b.Loop(); i++ {
		if err := s.ApplyBatch(batches[i%len(batches)], nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(64*b.N), "write-ns")
}

// BenchmarkApplyBatchSessions measures what sessions add to
// BenchmarkApplyBatch: its batches of 64 SETs applied with a stamp
// (stamped), and with each SET after an OpSeq (seq) of one of 1,000
// sessions, whose clients acknowledge all but their last 16 writes. Its
// ns/op is per batch; write-ns is per SET.
func BenchmarkApplyBatchSessions(b *testing.B) {
	loadBench(b)
	s, keys, val := benchData.s, benchData.keys, benchData.val
	b.Run("stamped", func(b *testing.B) {
		rng := rand.New(rand.NewPCG(1, 2))
		batches := make([][]byte, 1024)
		for i := range batches {
			var bt Batch
			for range 64 {
				bt.Add(OpSet, 0, keys[rng.IntN(benchRecords)], val)
			}
			batches[i] = bt.Bytes()
		}
		for i := 0; b.Loop(); i++ {
			if err := s.ApplyBatchAt(batches[i%len(batches)], Stamp{Index: uint64(1 + i), Time: int64(i)}, nil); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(64*b.N), "write-ns")
	})
	b.Run("seq", func(b *testing.B) { benchSeq(b, s, keys, val) })
}

// benchSeq is BenchmarkApplyBatchSessions's seq.
func benchSeq(b *testing.B, s *Store, keys [][]byte, val []byte) {
	const sessions, unacked = 1000, 16
	var opens Batch
	for range sessions {
		opens.Add(OpSessionOpen, 0)
	}
	var ids []uint64
	err := s.ApplyBatchAt(opens.Bytes(), Stamp{Index: 1 << 40}, func(_ int, r Result) { ids = append(ids, uint64(r.Int)) })
	if err != nil || len(ids) != sessions || ids[0] == 0 {
		b.Fatalf("opening sessions: %v, %v", err, ids[:1])
	}
	// The batches are built once; before each use, their OpSeqs get the
	// next seqs of their sessions, at offsets noted here.
	rng := rand.New(rand.NewPCG(1, 2))
	batches, at := make([][]byte, 1024), make([][]int, 1024)
	for i := range batches {
		var bt Batch
		for j := range 64 {
			at[i] = append(at[i], len(bt.Bytes())+1+14) // the seq's place: see AppendEntry
			bt.Add(OpSeq, 0, Uint64Arg(ids[(64*i+j)%sessions]), Uint64Arg(0), Uint64Arg(0))
			bt.Add(OpSet, 0, keys[rng.IntN(benchRecords)], val)
		}
		batches[i] = bt.Bytes()
	}
	next := make([]uint64, sessions)
	for i := 0; b.Loop(); i++ {
		n := i % len(batches)
		for j, off := range at[n] {
			seq := &next[(64*n+j)%sessions]
			binary.BigEndian.PutUint64(batches[n][off:], *seq)
			binary.BigEndian.PutUint64(batches[n][off+9:], *seq-min(*seq, unacked))
			*seq++
		}
		if err := s.ApplyBatchAt(batches[n], Stamp{Index: 1<<40 + uint64(1+i), Time: int64(i)}, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(64*b.N), "write-ns")
}

// BenchmarkInsert measures applying batches of 64 SETs of keys the store
// does not hold yet, from one goroutine, as the log's apply loop does: each
// adds a key to a stripe's table and an item to its ordered index, so this
// is what sorting and merging the index's runs cost. The keys are 16 bytes,
// "key:" and 12 digits, as redis-benchmark's -r makes them, in scrambled
// order; the values 3 bytes. The store grows with b.N, so run it with a
// fixed count: -benchtime 16384x adds 1,048,576 keys. Its ns/op is per
// batch, including building it; write-ns is per SET.
func BenchmarkInsert(b *testing.B) {
	s := New(Options{})
	var bt Batch
	key, val := make([]byte, 0, 17), []byte("xxx")
	for i := uint64(0); b.Loop(); i++ {
		bt.Reset()
		for j := range uint64(64) {
			// A prime to 10^12 makes x -> x*p mod 10^12 one to one: the
			// keys are distinct, scrambled, and x*p fits in 64 bits for
			// any count a benchmark reaches.
			n := (i*64 + j) * 999_999_937 % 1_000_000_000_000
			key = strconv.AppendUint(append(key[:0], "key:"...), n+1_000_000_000_000, 10)
			key = append(key[:4], key[5:]...) // 12 digits, zero-padded
			bt.Add(OpSet, 0, key, val)
		}
		if err := s.ApplyBatch(bt.Bytes(), nil); err != nil {
			b.Fatal(err)
		}
	}
	if got := s.Len(); got != int64(64*b.N) {
		b.Fatalf("store holds %d keys after %d distinct SETs", got, 64*b.N)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(64*b.N), "write-ns")
}

// BenchmarkMGet measures MGET of 16 and of 256 uniformly random keys of
// the 1,000,000, from one goroutine. Its ns/op is per MGET; key-ns is per
// key.
func BenchmarkMGet(b *testing.B) {
	for _, n := range []int{16, 256} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			loadBench(b)
			s, keys := benchData.s, benchData.keys
			rng := rand.New(rand.NewPCG(3, 4))
			mgets := make([][][]byte, 1024) // built before timing
			for i := range mgets {
				for range n {
					mgets[i] = append(mgets[i], keys[rng.IntN(benchRecords)])
				}
			}
			var sum int
			for i := 0; b.Loop(); i++ {
				s.MGet(mgets[i%len(mgets)], func(_ int, v []byte, found bool) {
					if !found {
						b.Fatal("a loaded key is missing")
					}
					sum += len(v)
				})
			}
			runtime.KeepAlive(sum)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*b.N), "key-ns")
		})
	}
}

// BenchmarkSnapshot measures how long taking a snapshot of a store with
// 1,000,000 keys holds every stripe's lock, which is how long it stalls
// writes (a background snapshot then writes the view without locks).
func BenchmarkSnapshot(b *testing.B) {
	s := New(Options{})
	val := make([]byte, 16)
	for i := range 1_000_000 {
		s.Apply(AppendEntry(nil, OpSet, 0, []byte(fmt.Sprintf("user%012d", i)), val))
	}
	for b.Loop() {
		s.Snapshot()
		// Writes after each snapshot, as a live server would make, so that
		// the next view has fresh items to sort, not an unchanged index.
		for i := range 64 {
			s.Apply(AppendEntry(nil, OpSet, 0, []byte(fmt.Sprintf("user%012d", i)), val))
		}
	}
}

// BenchmarkRangeN measures a short range read, 10 pairs from a random start,
// in a store of 1,000,000 keys.
func BenchmarkRangeN(b *testing.B) {
	loadBench(b)
	s, keys := benchData.s, benchData.keys
	rng := rand.New(rand.NewPCG(1, 2))
	var dst []Pair
	b.ResetTimer()
	for b.Loop() {
		if dst = s.RangeN(keys[rng.IntN(benchRecords)], []byte{0xff}, 10, dst[:0]); len(dst) == 0 {
			b.Fatal("empty range")
		}
	}
}

// BenchmarkLoad measures loading 1,000,000 keys in ascending order into an
// empty store, as a snapshot load does (Reserve, then Put).
func BenchmarkLoad(b *testing.B) {
	keys := make([][]byte, 1_000_000)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "user%012d", i)
	}
	val := make([]byte, 16)
	for b.Loop() {
		s := New(Options{})
		s.Reserve(len(keys))
		for _, k := range keys {
			s.Put(k, val)
		}
	}
}
