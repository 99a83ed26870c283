package raftlog_test

import (
	"math/rand/v2"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/raftlog"
	"github.com/flintkv/flint/internal/vfs"
	"github.com/flintkv/flint/internal/wal"
)

// BenchmarkEntries measures one raft read of 64 entries of 1 KiB, as a
// leader sends a follower that is behind, from the cache and from the WAL
// on the real filesystem (from the page cache: the segments were just
// written).
//
//	go test -run '^$' -bench BenchmarkEntries ./internal/raftlog
func BenchmarkEntries(b *testing.B) {
	const n, cached, size, read = 20000, 1000, 1024, 64
	w, err := wal.Open(vfs.OS, b.TempDir(), wal.Options{NoSync: true}, 0,
		wal.Replay{Entry: func(raftpb.Entry) error { return nil }, HardState: func(raftpb.HardState) error { return nil }})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	s, err := raftlog.New(w, raftpb.SnapshotMetadata{}, raftpb.HardState{}, raftlog.Options{CacheEntries: cached})
	if err != nil {
		b.Fatal(err)
	}
	for i := uint64(1); i <= n; i += 100 {
		es := make([]raftpb.Entry, 100)
		for k := range es {
			es[k] = raftpb.Entry{Index: i + uint64(k), Term: 1, Data: make([]byte, size)}
		}
		if err := w.Save(es, raftpb.HardState{}); err != nil {
			b.Fatal(err)
		}
		if err := s.Append(es); err != nil {
			b.Fatal(err)
		}
	}
	for _, bc := range []struct {
		name     string
		from, to uint64 // of the first entry read
	}{{"cache", n - cached + 1, n - read + 1}, {"wal", 1, n - cached - read}} {
		b.Run(bc.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			b.SetBytes(read * size)
			for b.Loop() {
				lo := bc.from + rng.Uint64N(bc.to-bc.from)
				if ents, err := s.Entries(lo, lo+read, 1<<20); err != nil || len(ents) != read {
					b.Fatalf("Entries(%d, %d): %d entries, %v", lo, lo+read, len(ents), err)
				}
			}
		})
	}
}
