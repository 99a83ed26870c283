package raftlog_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/raftlog"
	"github.com/flintkv/flint/internal/seedtest"
	"github.com/flintkv/flint/internal/vfs"
	"github.com/flintkv/flint/internal/wal"
)

// entry returns entry i of term, with data that names both.
func entry(i, term uint64) raftpb.Entry {
	return raftpb.Entry{Index: i, Term: term, Data: fmt.Appendf(nil, "entry %d of term %d, %*s", i, term, int(i%50), "")}
}

// entries returns the entries from..to (inclusive) of term.
func entries(from, to, term uint64) []raftpb.Entry {
	var es []raftpb.Entry
	for i := from; i <= to; i++ {
		es = append(es, entry(i, term))
	}
	return es
}

// openLog opens a log in a new Mem after index 0, and a Storage over it.
func openLog(t testing.TB, walOpt wal.Options, opt raftlog.Options) (*wal.WAL, *raftlog.Storage) {
	t.Helper()
	replay := wal.Replay{Entry: func(raftpb.Entry) error { return nil }, HardState: func(raftpb.HardState) error { return nil }}
	w, err := wal.Open(vfs.NewMem(), dir, walOpt, 0, replay)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	s, err := raftlog.New(w, raftpb.SnapshotMetadata{}, raftpb.HardState{}, opt)
	if err != nil {
		t.Fatal(err)
	}
	return w, s
}

// save saves es in w, then appends them to s.
func save(t testing.TB, w *wal.WAL, s *raftlog.Storage, es []raftpb.Entry) {
	t.Helper()
	if err := w.Save(es, raftpb.HardState{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(es); err != nil {
		t.Fatal(err)
	}
}

// TestEntriesFromLogAndCache reads ranges that span several segments of the
// WAL and the cache, with and without a size limit; then ranges that the
// WAL released, without and with compaction.
func TestEntriesFromLogAndCache(t *testing.T) {
	w, s := openLog(t, wal.Options{SegmentSize: 500}, raftlog.Options{CacheEntries: 20})
	for i := uint64(1); i <= 100; i += 5 {
		save(t, w, s, entries(i, i+4, 1))
	}
	save(t, w, s, entries(60, 90, 2)) // a rewrite, from segments before the last
	want := append(entries(1, 59, 1), entries(60, 90, 2)...)
	if n := w.Metrics().Segments; n < 5 {
		t.Fatalf("%d segments, want several", n)
	}
	for _, r := range [][2]uint64{{1, 91}, {3, 91}, {50, 80}, {69, 75}, {71, 91}, {1, 2}} {
		for _, max := range []uint64{0, 500, 2000, math.MaxUint64} {
			lo, hi := r[0], r[1]
			got, err := s.Entries(lo, hi, max)
			if err != nil {
				t.Fatalf("Entries(%d, %d, %d): %v", lo, hi, max, err)
			}
			checkSame(t, fmt.Sprintf("Entries(%d, %d, %d)", lo, hi, max), got, limitSize(want[lo-1:hi-1], max))
		}
	}

	// Entries whose segments the WAL released are compacted, before the
	// Storage is told (as when ReleaseTo races with a read) and after.
	if err := w.ReleaseTo(30); err != nil {
		t.Fatal(err)
	}
	first := w.FirstIndex()
	if first < 2 || first > 31 {
		t.Fatalf("the WAL starts at %d after ReleaseTo(30), want 2 to 31", first)
	}
	if _, err := s.Entries(first-1, 91, math.MaxUint64); err != raft.ErrCompacted {
		t.Fatalf("Entries(%d, 91) of released entries: %v, want ErrCompacted", first-1, err)
	}
	if _, err := s.Term(first - 1); err != raft.ErrCompacted {
		t.Fatalf("Term(%d) of a released entry: %v, want ErrCompacted", first-1, err)
	}
	if err := s.Compact(40); err != nil {
		t.Fatal(err)
	}
	if err := w.ReleaseTo(40); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Entries(40, 91, math.MaxUint64); err != raft.ErrCompacted {
		t.Fatalf("Entries(40, 91) after Compact(40): %v, want ErrCompacted", err)
	}
	got, err := s.Entries(41, 91, math.MaxUint64)
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, "Entries(41, 91) after Compact(40)", got, want[40:])
	if term, err := s.Term(40); err != nil || term != 1 {
		t.Fatalf("Term(40) after Compact(40) = %d, %v, want 1", term, err)
	}
}

// limitSize is raft's rule for how many of ents a read returns: at least
// one, then as many as keep their total size at most max.
func limitSize(ents []raftpb.Entry, max uint64) []raftpb.Entry {
	size := uint64(0)
	for i := range ents {
		size += uint64(ents[i].Size())
		if i > 0 && size > max {
			return ents[:i]
		}
	}
	return ents
}

// TestBadArguments: where MemoryStorage panics, Storage returns errors.
func TestBadArguments(t *testing.T) {
	w, s := openLog(t, wal.Options{}, raftlog.Options{})
	save(t, w, s, entries(1, 10, 1))
	if _, err := s.Entries(5, 12, math.MaxUint64); err != raft.ErrUnavailable {
		t.Fatalf("Entries past the end: %v, want ErrUnavailable", err)
	}
	if _, err := s.Entries(5, 4, math.MaxUint64); err != raft.ErrUnavailable {
		t.Fatalf("Entries(5, 4): %v, want ErrUnavailable", err)
	}
	if err := s.Append(entries(12, 12, 1)); err == nil {
		t.Fatal("Append leaving a gap succeeded")
	}
	if err := s.Compact(11); err == nil {
		t.Fatal("Compact past the end succeeded")
	}
	if _, err := s.CreateSnapshot(11, nil); err == nil {
		t.Fatal("CreateSnapshot past the end succeeded")
	}
	if err := s.Compact(5); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateSnapshot(3, nil); err != raft.ErrCompacted {
		t.Fatalf("CreateSnapshot before the compaction point: %v, want ErrCompacted", err)
	}
	if _, err := raftlog.New(w, raftpb.SnapshotMetadata{Index: 11}, raftpb.HardState{}, raftlog.Options{}); err == nil {
		t.Fatal("New with a snapshot after the log's end succeeded")
	}
}

// TestConcurrent runs raft's reads on one goroutine while another saves,
// rewrites, compacts and releases, for the race detector. Reads may only
// fail as raft expects: compacted, or (past an end that a rewrite moved
// back) unavailable.
func TestConcurrent(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedtest.Seed(t), 0))
	readRng := rand.New(rand.NewPCG(rng.Uint64(), 1))
	w, s := openLog(t, wal.Options{SegmentSize: 1000, NoSync: true}, raftlog.Options{CacheEntries: 50})
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(done)
		term := uint64(1)
		for i := uint64(1); i < 3000; {
			from := i
			if rng.IntN(10) == 0 && i > 150 {
				from -= 1 + rng.Uint64N(20)
				term++
			}
			es := entries(from, from+rng.Uint64N(5), term)
			if err := w.Save(es, raftpb.HardState{}); err != nil {
				t.Error(err)
				return
			}
			if err := s.Append(es); err != nil {
				t.Error(err)
				return
			}
			i = es[len(es)-1].Index + 1
			if rng.IntN(30) == 0 && i > 150 {
				if err := s.Compact(i - 100); err != nil && err != raft.ErrCompacted {
					t.Error(err)
					return
				}
				if err := w.ReleaseTo(i - 100); err != nil {
					t.Error(err)
					return
				}
			}
		}
	})
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			first, _ := s.FirstIndex()
			last, _ := s.LastIndex()
			if last < first {
				continue
			}
			lo := first + readRng.Uint64N(last-first+1)
			ents, err := s.Entries(lo, last+1, readRng.Uint64N(4000))
			if _, terr := s.Term(lo); err == nil {
				err = terr
			}
			if err != nil && !errors.Is(err, raft.ErrCompacted) && !errors.Is(err, raft.ErrUnavailable) {
				t.Error(err)
				return
			}
			for k, e := range ents {
				if want := entry(e.Index, e.Term); e.Index != lo+uint64(k) || string(e.Data) != string(want.Data) {
					t.Errorf("Entries(%d, %d) returned entry %d/%d %q at %d", lo, last+1, e.Index, e.Term, e.Data, k)
					return
				}
			}
		}
	})
	wg.Wait()
}
