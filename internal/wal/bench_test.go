package wal_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/vfs"
	"github.com/flintkv/flint/internal/wal"
)

// BenchmarkSave measures one Save of a group of entries on the real disk,
// as the append thread makes them: wall time, and the process's CPU time
// (user and system, from getrusage) per Save in cpu-us/op. With fsync the
// CPU time is mostly the kernel's, and is what a durable write costs the
// machine beyond the wait; see docs/PERFORMANCE.md.
//
//	go test -run '^$' -bench BenchmarkSave -benchtime 2000x ./internal/wal
func BenchmarkSave(b *testing.B) {
	for _, sync := range []bool{true, false} {
		for _, group := range []struct{ entries, size int }{{1, 64}, {16, 128}, {64, 1024}} {
			name := fmt.Sprintf("fsync=%t/entries=%d/size=%d", sync, group.entries, group.size)
			b.Run(name, func(b *testing.B) { benchSave(b, !sync, group.entries, group.size) })
		}
	}
}

func benchSave(b *testing.B, noSync bool, n, size int) {
	opt := wal.Options{NoSync: noSync, Preallocate: true, Logger: discard}
	w, err := wal.Open(vfs.OS, b.TempDir(), opt, 0, wal.Replay{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	es := make([]raftpb.Entry, n)
	data := make([]byte, size)
	index := uint64(0)
	b.SetBytes(int64(n * size))
	cpu0 := cpuTime(b)
	b.ResetTimer()
	for range b.N {
		for i := range es {
			index++
			es[i] = raftpb.Entry{Index: index, Term: 1, Data: data}
		}
		if err := w.Save(es, raftpb.HardState{Term: 1, Commit: index}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
