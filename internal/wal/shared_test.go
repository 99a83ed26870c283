package wal_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/seedtest"
	"github.com/flintkv/flint/internal/vfs"
	"github.com/flintkv/flint/internal/wal"
)

// sharedModel is what every group of a shared log should hold: its log,
// as raft's log rewrites work (applyLog), its snapshot and its hard state.
type sharedModel struct {
	logs  map[uint64][]raftpb.Entry
	snaps map[uint64]uint64 // the group's snapshot, released up to
	hs    map[uint64]raftpb.HardState
}

func newSharedModel() *sharedModel {
	return &sharedModel{logs: map[uint64][]raftpb.Entry{}, snaps: map[uint64]uint64{}, hs: map[uint64]raftpb.HardState{}}
}

// clone returns a copy of m, the state that a write still unsynced may be
// lost back to.
func (m *sharedModel) clone() *sharedModel {
	c := newSharedModel()
	for g, l := range m.logs {
		c.logs[g] = slices.Clone(l)
	}
	for g, s := range m.snaps {
		c.snaps[g] = s
	}
	for g, hs := range m.hs {
		c.hs[g] = hs
	}
	return c
}

// apply records ws in the model.
func (m *sharedModel) apply(ws []wal.Write) {
	for _, x := range ws {
		if x.Restart != 0 {
			m.logs[x.Group] = nil
		}
		m.logs[x.Group] = applyLog(m.logs[x.Group], x.Entries)
		if x.HardState != (raftpb.HardState{}) {
			m.hs[x.Group] = x.HardState
		}
	}
}

// last returns the index of group g's last entry, or its snapshot's.
func (m *sharedModel) last(g uint64) uint64 {
	if l := m.logs[g]; len(l) > 0 {
		return l[len(l)-1].Index
	}
	return m.snaps[g]
}

// randomWrites returns a batch of writes to some of n groups: mostly
// appends, now and then a rewrite of a group's last few entries in a new
// term, as raft's log truncation makes.
func (m *sharedModel) randomWrites(rng *rand.Rand, n int) []wal.Write {
	var ws []wal.Write
	for range 1 + rng.IntN(n) {
		g := uint64(1 + rng.IntN(n))
		last := m.last(g)
		from := last + 1
		term := m.hs[g].Term
		if last > m.snaps[g]+3 && rng.IntN(8) == 0 {
			from, term = last-uint64(rng.IntN(3)), term+1
		}
		term = max(term, 1)
		es := entries(from, from+uint64(rng.IntN(4)), term)
		x := wal.Write{Group: g, Entries: es, HardState: hardState(term, g, es[0].Index-1)}
		m.apply([]wal.Write{x})
		ws = append(ws, x)
	}
	return ws
}

// check fails unless every group's log in sh is as the model says.
func (m *sharedModel) check(t testing.TB, sh *wal.Shared, what string) {
	t.Helper()
	for g, want := range m.logs {
		grp, err := sh.Group(g, m.snaps[g])
		if err != nil {
			t.Fatalf("%s: Group(%d, %d): %v", what, g, m.snaps[g], err)
		}
		want = slices.DeleteFunc(slices.Clone(want), func(e raftpb.Entry) bool { return e.Index <= m.snaps[g] })
		checkGroup(t, fmt.Sprintf("%s: group %d", what, g), grp, want, m.snaps[g])
		if hs := grp.HardState(); hs != m.hs[g] {
			t.Fatalf("%s: group %d's hard state is %v, want %v", what, g, hs, m.hs[g])
		}
	}
}

// checkGroup fails unless grp holds the entries want after a snapshot at
// snap, and perhaps some before them.
func checkGroup(t testing.TB, what string, grp *wal.Group, want []raftpb.Entry, snap uint64) {
	t.Helper()
	last := snap
	if len(want) > 0 {
		last = want[len(want)-1].Index
	}
	if grp.LastIndex() != last || grp.FirstIndex() > snap+1 {
		t.Fatalf("%s: the log holds entries %d to %d, want up to %d from %d or before", what, grp.FirstIndex(), grp.LastIndex(), last, snap+1)
	}
	if len(want) == 0 {
		return
	}
	got, err := grp.Entries(snap+1, last+1, 1<<30)
	if err != nil {
		t.Fatalf("%s: Entries(%d, %d): %v", what, snap+1, last+1, err)
	}
	checkEntries(t, what, got, want)
	for _, e := range want {
		if term, err := grp.Term(e.Index); err != nil || term != e.Term {
			t.Fatalf("%s: Term(%d) = %d, %v, want %d", what, e.Index, term, err, e.Term)
		}
	}
}

func openShared(t testing.TB, fs vfs.FS, opt wal.Options) *wal.Shared {
	t.Helper()
	if opt.Logger == nil {
		opt.Logger = discard
	}
	sh, err := wal.OpenShared(fs, dir, opt)
	if err != nil {
		t.Fatalf("OpenShared: %v", err)
	}
	return sh
}

func mustSaveShared(t testing.TB, sh *wal.Shared, ws []wal.Write) {
	t.Helper()
	if err := sh.Save(ws); err != nil {
		t.Fatalf("Save: %v", err)
	}
}

// TestSharedInterleaved writes random batches over many groups, with
// rewrites of their tails, into small segments: each group reads back its
// own log, before and after a reopen, and each batch cost one fsync.
func TestSharedInterleaved(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedtest.Seed(t), 0))
	m := vfs.NewMem()
	f := vfs.NewFaulty(m)
	sh := openShared(t, f, wal.Options{SegmentSize: 4 << 10})
	model := newSharedModel()
	const batches, groups = 300, 24
	syncs := f.Syncs()
	for range batches {
		mustSaveShared(t, sh, model.randomWrites(rng, groups))
	}
	if got, segs := f.Syncs()-syncs, int64(len(segments(t, m))); got > batches+2*segs {
		t.Fatalf("%d fsyncs for %d writes over %d segments, want one per write and two per segment", got, batches, segs)
	}
	model.check(t, sh, "before reopening")
	mustCloseShared(t, sh)
	sh = openShared(t, f, wal.Options{SegmentSize: 4 << 10})
	defer mustCloseShared(t, sh)
	model.check(t, sh, "after reopening")
	mustSaveShared(t, sh, model.randomWrites(rng, groups))
	model.check(t, sh, "after a write once reopened")
}

func mustCloseShared(t testing.TB, sh *wal.Shared) {
	t.Helper()
	if err := sh.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// TestSharedRelease: a segment goes only once every group with entries in
// it has a snapshot past them; Holders names the groups that keep the
// oldest one; a reopened log serves each group from its snapshot on.
func TestSharedRelease(t *testing.T) {
	m := vfs.NewMem()
	opt := wal.Options{SegmentSize: 1 << 10}
	sh := openShared(t, m, opt)
	model := newSharedModel()
	const groups = 4
	write := func(g uint64, n int) {
		t.Helper()
		for range n {
			from := model.last(g) + 1
			x := wal.Write{Group: g, Entries: entries(from, from+1, 1), HardState: hardState(1, g, from)}
			model.apply([]wal.Write{x})
			mustSaveShared(t, sh, []wal.Write{x})
		}
	}
	for g := uint64(1); g <= groups; g++ {
		write(g, 2)
	}
	for range 4 { // group 1 alone fills segments
		write(1, 20)
	}
	segs := segments(t, m)
	if len(segs) < 3 {
		t.Fatalf("segments %v, want 3 or more", segs)
	}
	if got, want := sh.Holders(), []uint64{1, 2, 3, 4}; !slices.Equal(got, want) {
		t.Fatalf("Holders() = %v, want %v", got, want)
	}
	release := func(g uint64) {
		t.Helper()
		model.snaps[g] = model.last(g)
		if err := sh.ReleaseTo(g, model.snaps[g]); err != nil {
			t.Fatalf("ReleaseTo(%d): %v", g, err)
		}
	}
	release(1)
	if got := segments(t, m); !slices.Equal(got, segs) {
		t.Fatalf("group 1's release deleted segments: %v, want %v", got, segs)
	}
	if got, want := sh.Holders(), []uint64{2, 3, 4}; !slices.Equal(got, want) {
		t.Fatalf("Holders() = %v, want %v", got, want)
	}
	release(2)
	release(3)
	release(4)
	if got := segments(t, m); len(got) != 1 || got[0] != segs[len(segs)-1] {
		t.Fatalf("segments %v after every group released, want only the last, %s", got, segs[len(segs)-1])
	}
	if sh.Holders() != nil {
		t.Fatalf("Holders() = %v with one segment", sh.Holders())
	}
	g2, err := sh.Group(2, model.snaps[2])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g2.Entries(1, 2, 1<<20); !errors.Is(err, wal.ErrReleased) {
		t.Fatalf("Entries of a released entry: %v, want ErrReleased", err)
	}
	write(3, 3)
	mustCloseShared(t, sh)
	sh = openShared(t, m, opt)
	defer mustCloseShared(t, sh)
	model.check(t, sh, "after reopening")
	if _, err := sh.Group(3, 0); err == nil {
		t.Fatal("Group(3, 0) succeeded for a group whose first entries were released")
	}
}

// TestSharedRestart: a group that installs a snapshot from its leader
// starts its log over, and its older entries no longer keep segments.
func TestSharedRestart(t *testing.T) {
	m := vfs.NewMem()
	opt := wal.Options{SegmentSize: 1 << 10}
	sh := openShared(t, m, opt)
	model := newSharedModel()
	for i := uint64(1); i <= 60; i += 2 {
		ws := []wal.Write{
			{Group: 1, Entries: entries(i, i+1, 1), HardState: hardState(1, 1, i)},
			{Group: 2, Entries: entries(i, i+1, 1), HardState: hardState(1, 2, i)},
		}
		model.apply(ws)
		mustSaveShared(t, sh, ws)
	}
	model.snaps[2] = 60
	if err := sh.ReleaseTo(2, 60); err != nil {
		t.Fatal(err)
	}
	ws := []wal.Write{{Group: 1, Restart: 500, Entries: entries(501, 502, 3), HardState: hardState(3, 0, 500)}}
	model.apply(ws)
	model.snaps[1] = 500
	mustSaveShared(t, sh, ws)
	if err := sh.ReleaseTo(1, 500); err != nil {
		t.Fatal(err)
	}
	if got := segments(t, m); len(got) != 1 {
		t.Fatalf("segments %v after the restart and group 2's release, want only the last", got)
	}
	mustCloseShared(t, sh)
	sh = openShared(t, m, opt)
	model.check(t, sh, "after reopening")
	mustCloseShared(t, sh)

	// Without the segments deleted, the restart record ends the log before
	// it, and needs the snapshot.
	m = vfs.NewMem()
	sh = openShared(t, m, opt)
	mustSaveShared(t, sh, []wal.Write{{Group: 1, Entries: entries(1, 5, 1), HardState: hardState(1, 1, 5)}})
	mustSaveShared(t, sh, []wal.Write{{Group: 1, Restart: 40, Entries: entries(41, 41, 2)}})
	mustCloseShared(t, sh)
	sh = openShared(t, m, opt)
	defer mustCloseShared(t, sh)
	if _, err := sh.Group(1, 5); err == nil {
		t.Fatal("Group(1, 5) succeeded for a log that restarts after 40")
	}
	g, err := sh.Group(1, 40)
	if err != nil {
		t.Fatal(err)
	}
	checkGroup(t, "restarted group", g, entries(41, 41, 2), 40)
}

// TestSharedCrash crashes a shared log, with power losses that tear what
// was not synced, between random writes over many groups: every group
// keeps every write that Save acknowledged, and the log goes on.
// With Preallocate, segments start from spare files of zeros.
func TestSharedCrash(t *testing.T) {
	for _, prealloc := range []bool{false, true} {
		t.Run(fmt.Sprintf("preallocate=%t", prealloc), func(t *testing.T) {
			testSharedCrash(t, wal.Options{SegmentSize: 2 << 10, Preallocate: prealloc})
		})
	}
}

func testSharedCrash(t *testing.T, opt wal.Options) {
	rng := rand.New(rand.NewPCG(seedtest.Seed(t), 0))
	m := vfs.NewMem()
	sh := openShared(t, m, opt)
	acked := newSharedModel()
	const rounds, groups = 30, 12
	for round := range rounds {
		for range 1 + rng.IntN(10) {
			mustSaveShared(t, sh, acked.randomWrites(rng, groups))
		}
		for g := range acked.logs {
			if rng.IntN(4) == 0 && acked.last(g) > acked.snaps[g] {
				acked.snaps[g] = acked.last(g) - uint64(rng.IntN(2))
				if err := sh.ReleaseTo(g, acked.snaps[g]); err != nil {
					t.Fatal(err)
				}
			}
		}
		lost := acked.clone()
		var unsynced []wal.Write // writes that a power loss may take
		for range rng.IntN(3) {
			ws := lost.randomWrites(rng, groups)
			if err := sh.Append(ws); err != nil {
				t.Fatal(err)
			}
			unsynced = append(unsynced, ws...)
		}
		powerLoss(m, rng)
		sh = openShared(t, m, opt)
		recovered := checkCrashed(t, sh, acked, unsynced, fmt.Sprintf("round %d", round))
		acked = recovered
	}
	mustCloseShared(t, sh)
}

// checkCrashed fails unless each group's log after a crash is what acked
// says, with perhaps some of the unsynced writes made after it: a power
// loss keeps a prefix of the log's frames, so a prefix of each group's
// unsynced entries, in the order written. It returns the model of what
// the log holds.
func checkCrashed(t testing.TB, sh *wal.Shared, acked *sharedModel, unsynced []wal.Write, what string) *sharedModel {
	t.Helper()
	got := acked.clone()
	for g, want := range acked.logs {
		snap := acked.snaps[g]
		grp, err := sh.Group(g, snap)
		if err != nil {
			t.Fatalf("%s: Group(%d, %d): %v", what, g, snap, err)
		}
		var ents []raftpb.Entry
		if grp.LastIndex() > snap {
			if ents, err = grp.Entries(snap+1, grp.LastIndex()+1, 1<<30); err != nil {
				t.Fatalf("%s: group %d: %v", what, g, err)
			}
		}
		log := slices.DeleteFunc(slices.Clone(want), func(e raftpb.Entry) bool { return e.Index <= snap })
		if !keptPrefix(ents, log, entriesOf(unsynced, g)) {
			t.Fatalf("%s: group %d holds %s after the crash, want %s acknowledged, with a prefix of its unsynced entries %s",
				what, g, span(ents), span(log), span(entriesOf(unsynced, g)))
		}
		got.logs[g] = ents
		got.hs[g] = grp.HardState()
	}
	return got
}

// entriesOf returns group g's entries in ws, in order.
func entriesOf(ws []wal.Write, g uint64) []raftpb.Entry {
	var es []raftpb.Entry
	for _, x := range ws {
		if x.Group == g {
			es = append(es, x.Entries...)
		}
	}
	return es
}

// keptPrefix reports whether got is log with a prefix of more applied to
// it, entry by entry.
func keptPrefix(got, log, more []raftpb.Entry) bool {
	for i := 0; ; i++ {
		if sameEntries(got, log) {
			return true
		}
		if i == len(more) {
			return false
		}
		log = applyLog(log, more[i:i+1])
	}
}

func sameEntries(a, b []raftpb.Entry) bool {
	return slices.EqualFunc(a, b, func(x, y raftpb.Entry) bool {
		return x.Index == y.Index && x.Term == y.Term && x.Type == y.Type && string(x.Data) == string(y.Data)
	})
}

// TestSharedFormats: a shared log and a log of one group each refuse to
// open the other.
func TestSharedFormats(t *testing.T) {
	m := vfs.NewMem()
	sh := openShared(t, m, wal.Options{})
	mustSaveShared(t, sh, []wal.Write{{Group: 7, Entries: entries(1, 3, 1)}})
	mustCloseShared(t, sh)
	if _, _, err := open(t, m, wal.Options{}, 0); err == nil {
		t.Fatal("Open read a shared log")
	}
	m = vfs.NewMem()
	w, _ := mustOpen(t, m, wal.Options{}, 0)
	mustSave(t, w, entries(1, 3, 1), hardState(1, 1, 0))
	mustClose(t, w)
	if _, err := wal.OpenShared(m, dir, wal.Options{Logger: discard}); err == nil {
		t.Fatal("OpenShared read a log of one group")
	}
	if _, err := wal.OpenShared(vfs.NewMem(), dir, wal.Options{NoSync: true}); err == nil {
		t.Fatal("OpenShared accepted NoSync")
	}
}
