package wal_test

import (
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/vfs"
	"github.com/flintkv/flint/internal/wal"
)

// BenchmarkSave measures one Save of a group of entries on the real disk,
// in a segment started from a preallocated spare, as flint serve writes
// them: wall time, and in cpu-us/op the CPU time (user and system) of the
// thread that calls Save. That leaves out the goroutine that prepares the
// next spare, which flint serve pays once per segment. With fsync the CPU
// time is mostly the kernel's, and a floor for what a durable write costs
// the machine beyond the wait: interrupts and the host's side of the I/O
// fall elsewhere. See docs/PERFORMANCE.md.
//
//	go test -run '^$' -bench BenchmarkSave -benchtime 2000x ./internal/wal
func BenchmarkSave(b *testing.B) {
	for _, sync := range []bool{true, false} {
		for _, group := range []struct{ entries, size int }{{1, 64}, {16, 128}, {256, 64}} {
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
	save := func() {
		for i := range es {
			index++
			es[i] = raftpb.Entry{Index: index, Term: 1, Data: data}
		}
		if err := w.Save(es, raftpb.HardState{Term: 1, Commit: index}); err != nil {
			b.Fatal(err)
		}
	}
	// A new log's first segment grows as it is written; Save moves to the
	// spare once it is ready.
	for deadline := time.Now().Add(time.Minute); w.Metrics().Spares == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("no spare segment after a minute")
		}
		save()
	}
	runtime.LockOSThread() // so that the thread's CPU time is Save's
	defer runtime.UnlockOSThread()
	b.SetBytes(int64(n * size))
	cpu0 := threadCPU(b)
	b.ResetTimer()
	for range b.N {
		save()
	}
	b.StopTimer()
	b.ReportMetric(float64((threadCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
}

// threadCPU is the calling thread's user and system CPU time so far.
func threadCPU(b *testing.B) time.Duration {
	const rusageThread = 1 // RUSAGE_THREAD, Linux's
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
