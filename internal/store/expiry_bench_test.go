package store

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
)

// BenchmarkApplySetExpire compares applying batches of 64 SETs of
// uniformly random keys of its own 1,000,000 (set) with the same SETs
// with a deadline an hour ahead (set-ex), stamped as the log's apply loop
// applies them. Its ns/op is per batch; write-ns is per SET.
func BenchmarkApplySetExpire(b *testing.B) {
	for _, ex := range []bool{false, true} {
		name := map[bool]string{false: "set", true: "set-ex"}[ex]
		b.Run(name, func(b *testing.B) {
			s := New(Options{})
			keys := make([][]byte, benchRecords)
			for i := range keys {
				keys[i] = fmt.Appendf(nil, "key:%012d", i)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			batches := make([][]byte, 1024)
			for i := range batches {
				var bt Batch
				for range 64 {
					k := keys[rng.IntN(benchRecords)]
					if ex {
						bt.Add(OpSetExpire, ExpireRelative, k, []byte("xxx"), DeadlineArg(3_600_000))
					} else {
						bt.Add(OpSet, 0, k, []byte("xxx"))
					}
				}
				batches[i] = bt.Bytes()
			}
			at := Stamp{Index: 1, Time: 1_700_000_000e9}
			for i := 0; b.Loop(); i++ {
				at.Index++
				at.Time += 1e6
				if err := s.ApplyBatchAt(batches[i%len(batches)], at, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(64*b.N), "write-ns")
		})
	}
}

// BenchmarkMemoryPerKey measures the heap that 1,000,000 keys of 16 bytes
// with 3-byte values take, without deadlines (none) and each with one
// (ttl), after a collection. Run it once: -benchtime 1x. B/key is the
// heap per key.
func BenchmarkMemoryPerKey(b *testing.B) {
	for _, ttl := range []bool{false, true} {
		name := map[bool]string{false: "none", true: "ttl"}[ttl]
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				before := heapAfterGC()
				s := New(Options{})
				var bt Batch
				for i := 0; i < benchRecords; i += 1000 {
					bt.Reset()
					for j := i; j < i+1000; j++ {
						k := fmt.Appendf(nil, "key:%012d", j)
						if ttl {
							bt.Add(OpSetExpire, ExpireRelative, k, []byte("xxx"), DeadlineArg(3_600_000))
						} else {
							bt.Add(OpSet, 0, k, []byte("xxx"))
						}
					}
					if err := s.ApplyBatchAt(bt.Bytes(), Stamp{Index: uint64(i + 1), Time: 1_700_000_000e9}, nil); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(heapAfterGC()-before)/benchRecords, "B/key")
				runtime.KeepAlive(s)
			}
		})
	}
}

func heapAfterGC() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
