package raftlog_test

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/raftlog"
	"github.com/flintkv/flint/internal/seedtest"
	"github.com/flintkv/flint/internal/vfs"
	"github.com/flintkv/flint/internal/wal"
)

// model drives a Storage over a WAL on a Mem and a raft.MemoryStorage with
// the same calls, as a replica would, and checks that they answer alike.
type model struct {
	t       *testing.T
	rng     *rand.Rand
	m       *vfs.Mem
	walOpt  wal.Options
	opt     raftlog.Options
	w       *wal.WAL
	s       *raftlog.Storage
	ms      *raft.MemoryStorage
	hs      raftpb.HardState // the last saved
	term    uint64           // the highest term of an entry appended
	step    int
	kept    []kept // slices Entries returned, which must not change
	entries int    // appended, for the test's log
}

// kept is a slice Entries returned, and a copy of what it held.
type kept struct{ got, want []raftpb.Entry }

// dir is the log directory.
const dir = "wal"

// TestModel compares Storage with raft.MemoryStorage under random appends,
// rewrites of the tail, hard states, snapshots created and installed,
// compactions, WAL releases and reopenings of the WAL, with small segments
// and a small cache. Rerun a failure with -seed.
func TestModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedtest.Seed(t), 0))
	for range 8 {
		md := newModel(t, rng)
		for md.step = range 600 {
			md.do()
			md.check()
		}
		md.checkKept()
		if err := md.w.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// newModel starts a model at a snapshot at index 0, or at a later one.
func newModel(t *testing.T, rng *rand.Rand) *model {
	md := &model{t: t, rng: rng, m: vfs.NewMem(), ms: raft.NewMemoryStorage(),
		walOpt: wal.Options{SegmentSize: 100 + rng.Int64N(2000), NoSync: rng.IntN(2) == 0},
		opt:    raftlog.Options{CacheBytes: 1 + rng.Int64N(3000), CacheEntries: 1 + rng.IntN(30)}}
	var snap raftpb.SnapshotMetadata
	if rng.IntN(2) == 0 {
		snap = raftpb.SnapshotMetadata{Index: 1 + rng.Uint64N(100), Term: 1 + rng.Uint64N(3), ConfState: raftpb.ConfState{Voters: []uint64{1}}}
		md.must(md.ms.ApplySnapshot(raftpb.Snapshot{Metadata: snap}))
	}
	md.term = snap.Term
	md.open(snap)
	t.Logf("segments of %d bytes, NoSync %v, cache of %d bytes, %d entries, snapshot at %d",
		md.walOpt.SegmentSize, md.walOpt.NoSync, md.opt.CacheBytes, md.opt.CacheEntries, snap.Index)
	return md
}

// open opens the WAL after snap and a new Storage over it.
func (md *model) open(snap raftpb.SnapshotMetadata) {
	var hs raftpb.HardState
	w, err := wal.Open(md.m, dir, md.walOpt, snap.Index, wal.Replay{
		Entry:     func(raftpb.Entry) error { return nil },
		HardState: func(h raftpb.HardState) error { hs = h; return nil },
	})
	md.must(err)
	if hs != md.hs {
		md.t.Fatalf("step %d: the WAL replayed the hard state %v, want %v", md.step, hs, md.hs)
	}
	md.w = w
	md.s, err = raftlog.New(w, snap, hs, md.opt)
	md.must(err)
}

func (md *model) must(err error) {
	md.t.Helper()
	if err != nil {
		md.t.Fatalf("step %d: %v", md.step, err)
	}
}

// do makes one random change to both storages.
func (md *model) do() {
	switch op := md.rng.IntN(100); {
	case op < 45:
		md.append(md.appendFrom())
	case op < 55:
		md.setHardState()
	case op < 65:
		md.compact()
	case op < 72:
		md.createSnapshot()
	case op < 76:
		md.applySnapshot()
	case op < 88:
		md.release()
	case op < 93:
		md.reopen()
	default: // a read that the next check does not make
		md.keep()
	}
}

// appendFrom returns where the next append starts: after the last entry,
// or (as a new leader's entries do) at an entry after the compaction
// point, or, rarely, before it.
func (md *model) appendFrom() uint64 {
	first, last := md.bounds()
	switch n := md.rng.IntN(20); {
	case n < 4 && last >= first:
		md.term++
		return first + md.rng.Uint64N(last-first+1)
	case n == 4 && first > 1:
		md.term++
		return first - 1 - md.rng.Uint64N(min(first-1, 3))
	}
	return last + 1
}

// append saves entries from index from in the WAL, then appends them to
// both storages. The WAL gets only those after the compaction point, as
// raft never writes entries it has compacted.
func (md *model) append(from uint64) {
	if md.rng.IntN(10) == 0 {
		md.term++
	}
	ents := make([]raftpb.Entry, 1+md.rng.IntN(6))
	for i := range ents {
		md.entries++
		data := make([]byte, md.rng.IntN(200))
		copy(data, fmt.Sprintf("entry %d of the test", md.entries))
		typ := raftpb.EntryNormal
		if md.rng.IntN(10) == 0 {
			typ = raftpb.EntryConfChangeV2
		}
		ents[i] = raftpb.Entry{Index: from + uint64(i), Term: md.term, Type: typ, Data: data}
	}
	first, _ := md.bounds()
	saved := ents
	for len(saved) > 0 && saved[0].Index < first {
		saved = saved[1:]
	}
	md.must(md.w.Save(saved, raftpb.HardState{}))
	md.same("Append", md.s.Append(ents), md.ms.Append(ents))
}

// setHardState saves a hard state in the WAL and sets it in both.
func (md *model) setHardState() {
	md.hs = raftpb.HardState{Term: md.term + md.rng.Uint64N(2), Vote: md.rng.Uint64N(4), Commit: md.rng.Uint64N(1000)}
	md.must(md.w.Save(nil, md.hs))
	md.same("SetHardState", md.s.SetHardState(md.hs), md.ms.SetHardState(md.hs))
}

// compact compacts both to an entry of the log, or, rarely, to one
// compacted already.
func (md *model) compact() {
	first, last := md.bounds()
	i := first - 1 - md.rng.Uint64N(min(first, 3))
	if md.rng.IntN(5) > 0 && last >= first {
		i = first + md.rng.Uint64N(last-first+1)
	}
	md.same(fmt.Sprintf("Compact(%d)", i), md.s.Compact(i), md.ms.Compact(i))
}

// createSnapshot records a snapshot at an entry of the log, or, rarely, at
// one before the newest snapshot.
func (md *model) createSnapshot() {
	first, last := md.bounds()
	snap, _ := md.ms.Snapshot()
	lo := max(snap.Metadata.Index+1, first-1)
	i := snap.Metadata.Index - md.rng.Uint64N(min(snap.Metadata.Index+1, 3))
	if md.rng.IntN(5) > 0 && last >= lo {
		i = lo + md.rng.Uint64N(last-lo+1)
	}
	cs := &raftpb.ConfState{Voters: []uint64{1, 1 + md.rng.Uint64N(5)}}
	if md.rng.IntN(3) == 0 {
		cs = nil
	}
	got, err := md.s.CreateSnapshot(i, cs)
	want, werr := md.ms.CreateSnapshot(i, cs, nil)
	md.same(fmt.Sprintf("CreateSnapshot(%d)", i), err, werr)
	if !reflect.DeepEqual(got, want) {
		md.t.Fatalf("step %d: CreateSnapshot(%d) = %v, want %v", md.step, i, got, want)
	}
}

// applySnapshot installs a snapshot from a leader in both, after the
// compaction point as raft's are, then appends the entries that follow
// it, as the leader would send them, so that the WAL holds the log again;
// or, rarely, installs a snapshot older than the newest.
func (md *model) applySnapshot() {
	first, last := md.bounds()
	snap, _ := md.ms.Snapshot()
	meta := raftpb.SnapshotMetadata{Index: snap.Metadata.Index - md.rng.Uint64N(min(snap.Metadata.Index+1, 3)), Term: md.term,
		ConfState: raftpb.ConfState{Voters: []uint64{1, 2, 3}}}
	if md.rng.IntN(5) > 0 {
		md.term++
		meta.Index, meta.Term = max(first, snap.Metadata.Index+1)+md.rng.Uint64N(last+10-first), md.term
	}
	s := raftpb.Snapshot{Metadata: meta}
	err, werr := md.s.ApplySnapshot(s), md.ms.ApplySnapshot(s)
	md.same(fmt.Sprintf("ApplySnapshot(%d)", meta.Index), err, werr)
	if err == nil {
		md.check()
		md.append(meta.Index + 1)
	}
}

// release lets the WAL delete the segments up to a compacted entry.
func (md *model) release() {
	first, _ := md.bounds()
	md.must(md.w.ReleaseTo(md.rng.Uint64N(first)))
}

// reopen reopens the WAL after the compaction point, and a new Storage
// over it; the model restarts from the same state.
func (md *model) reopen() {
	md.must(md.w.Close())
	first, last := md.bounds()
	term, err := md.ms.Term(first - 1)
	md.must(err)
	snap, _ := md.ms.Snapshot()
	meta := raftpb.SnapshotMetadata{Index: first - 1, Term: term, ConfState: snap.Metadata.ConfState}
	var ents []raftpb.Entry
	if last >= first {
		ents, err = md.ms.Entries(first, last+1, math.MaxUint64)
		md.must(err)
	}
	md.ms = raft.NewMemoryStorage()
	if meta.Index > 0 {
		md.must(md.ms.ApplySnapshot(raftpb.Snapshot{Metadata: meta}))
	} else {
		meta = raftpb.SnapshotMetadata{} // as a MemoryStorage starts; it holds no snapshot at 0
	}
	md.must(md.ms.Append(ents))
	md.must(md.ms.SetHardState(md.hs))
	md.open(meta)
}

// bounds returns the model's first and last index.
func (md *model) bounds() (first, last uint64) {
	first, _ = md.ms.FirstIndex()
	last, _ = md.ms.LastIndex()
	return first, last
}

// same fails unless both storages returned the same error.
func (md *model) same(what string, err, want error) {
	md.t.Helper()
	if err != want {
		md.t.Fatalf("step %d: %s: %v, want %v", md.step, what, err, want)
	}
}

// check compares everything both storages answer.
func (md *model) check() {
	md.t.Helper()
	first, last := md.bounds()
	if f, _ := md.s.FirstIndex(); f != first {
		md.t.Fatalf("step %d: FirstIndex %d, want %d", md.step, f, first)
	}
	if l, _ := md.s.LastIndex(); l != last {
		md.t.Fatalf("step %d: LastIndex %d, want %d", md.step, l, last)
	}
	hs, cs, _ := md.s.InitialState()
	whs, wcs, _ := md.ms.InitialState()
	if hs != whs || !reflect.DeepEqual(cs, wcs) {
		md.t.Fatalf("step %d: InitialState %v %v, want %v %v", md.step, hs, cs, whs, wcs)
	}
	snap, _ := md.s.Snapshot()
	wsnap, _ := md.ms.Snapshot()
	if !reflect.DeepEqual(snap, wsnap) {
		md.t.Fatalf("step %d: Snapshot %v, want %v", md.step, snap, wsnap)
	}
	for i := first - min(first, 2); i <= last+2; i++ {
		term, err := md.s.Term(i)
		wterm, werr := md.ms.Term(i)
		if term != wterm || err != werr {
			md.t.Fatalf("step %d: Term(%d) = %d, %v, want %d, %v", md.step, i, term, err, wterm, werr)
		}
	}
	md.checkEntries(first, last+1, math.MaxUint64)
	for range 4 {
		from := first - min(first, 2)
		lo := from + md.rng.Uint64N(last+2-from)
		hi := lo + md.rng.Uint64N(last+2-lo)
		md.checkEntries(lo, hi, md.rng.Uint64N(1500))
	}
	if _, err := md.s.Entries(first, last+2, math.MaxUint64); err != raft.ErrUnavailable && err != raft.ErrCompacted {
		md.t.Fatalf("step %d: Entries(%d, %d) past the end: %v, want ErrUnavailable", md.step, first, last+2, err)
	}
}

// checkEntries compares Entries(lo, hi, max) of both, with hi at most one
// after the last (MemoryStorage panics past it), and returns what the
// Storage returned.
func (md *model) checkEntries(lo, hi, max uint64) []raftpb.Entry {
	md.t.Helper()
	got, err := md.s.Entries(lo, hi, max)
	want, werr := md.ms.Entries(lo, hi, max)
	what := fmt.Sprintf("step %d: Entries(%d, %d, %d)", md.step, lo, hi, max)
	md.same(what, err, werr)
	checkSame(md.t, what, got, want)
	return got
}

// keep reads a random range and keeps what it got, to check at the end that
// it did not change.
func (md *model) keep() {
	first, last := md.bounds()
	if last < first {
		return
	}
	lo := first + md.rng.Uint64N(last-first+1)
	got := md.checkEntries(lo, last+1, md.rng.Uint64N(3000))
	want := make([]raftpb.Entry, len(got))
	for i, e := range got {
		e.Data = bytes.Clone(e.Data)
		want[i] = e
	}
	md.kept = append(md.kept, kept{got: got, want: want})
}

// checkKept checks that the slices Entries returned are as they were.
func (md *model) checkKept() {
	for i, k := range md.kept {
		checkSame(md.t, fmt.Sprintf("the entries of read %d, at the end", i), k.got, k.want)
	}
}

// checkSame fails unless got and want hold the same entries.
func checkSame(t *testing.T, what string, got, want []raftpb.Entry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d entries, want %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Index != w.Index || g.Term != w.Term || g.Type != w.Type || !bytes.Equal(g.Data, w.Data) {
			t.Fatalf("%s: entry %d is %d/%d type %d %q, want %d/%d type %d %q", what, i, g.Index, g.Term, g.Type, g.Data, w.Index, w.Term, w.Type, w.Data)
		}
	}
}
