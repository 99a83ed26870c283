package wal_test

import (
	"fmt"
	"path"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/vfs"
	"github.com/flintkv/flint/internal/wal"
)

// BenchmarkSharedSyncs writes batches of 64 entries of 128 bytes on the
// real disk, as a node's log writer does, spread over 1 or 64 groups: in
// the shared log (layout=shared), each batch is one write and one fsync
// however many groups it holds; with a log per group (layout=per-group, as
// a process per group has), a batch over 64 groups costs 64. fsyncs/op
// and fsyncs/s are counted by the filesystem (vfs.Faulty), entries/s is
// the throughput. See docs/PERFORMANCE.md.
//
//	go test -run '^$' -bench BenchmarkSharedSyncs -benchtime 300x ./internal/wal
func BenchmarkSharedSyncs(b *testing.B) {
	const batch = 64
	for _, groups := range []int{1, 64} {
		b.Run(fmt.Sprintf("layout=shared/groups=%d", groups), func(b *testing.B) { benchShared(b, groups, batch) })
	}
	b.Run("layout=per-group/groups=64", func(b *testing.B) { benchPerGroup(b, 64, batch) })
}

func benchShared(b *testing.B, groups, batch int) {
	fs := vfs.NewFaulty(vfs.OS)
	sh, err := wal.OpenShared(fs, b.TempDir(), wal.Options{Logger: discard})
	if err != nil {
		b.Fatal(err)
	}
	defer sh.Close()
	next := make([]uint64, groups+1)
	data := make([]byte, 128)
	ws := make([]wal.Write, groups)
	runSyncBench(b, fs, batch, func() {
		for g := range ws {
			n := batch / groups
			es := make([]raftpb.Entry, n)
			for i := range es {
				next[g+1]++
				es[i] = raftpb.Entry{Index: next[g+1], Term: 1, Data: data}
			}
			ws[g] = wal.Write{Group: uint64(g + 1), Entries: es, HardState: raftpb.HardState{Term: 1, Commit: next[g+1]}}
		}
		if err := sh.Save(ws); err != nil {
			b.Fatal(err)
		}
	})
}

func benchPerGroup(b *testing.B, groups, batch int) {
	fs := vfs.NewFaulty(vfs.OS)
	logs := make([]*wal.WAL, groups)
	for g := range logs {
		w, err := wal.Open(fs, path.Join(b.TempDir(), fmt.Sprint(g)), wal.Options{Logger: discard}, 0, wal.Replay{})
		if err != nil {
			b.Fatal(err)
		}
		defer w.Close()
		logs[g] = w
	}
	data := make([]byte, 128)
	next := uint64(0) // the last index, the same in every log
	runSyncBench(b, fs, batch, func() {
		es := make([]raftpb.Entry, batch/groups)
		for i := range es {
			next++
			es[i] = raftpb.Entry{Index: next, Term: 1, Data: data}
		}
		for _, w := range logs {
			if err := w.Save(es, raftpb.HardState{Term: 1, Commit: next}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// runSyncBench runs save b.N times, and reports the fsyncs that fs counted
// and the entries written (batch per op) per second.
func runSyncBench(b *testing.B, fs *vfs.Faulty, batch int, save func()) {
	syncs := fs.Syncs()
	start := time.Now()
	b.ResetTimer()
	for range b.N {
		save()
	}
	b.StopTimer()
	secs := time.Since(start).Seconds()
	n := float64(fs.Syncs() - syncs)
	b.ReportMetric(n/float64(b.N), "fsyncs/op")
	b.ReportMetric(n/secs, "fsyncs/s")
	b.ReportMetric(float64(b.N*batch)/secs, "entries/s")
}
