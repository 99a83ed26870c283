package replica

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/flintkv/flint/internal/store"
	"github.com/flintkv/flint/internal/vfs"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func open(t *testing.T, fs vfs.FS, opt Options) *Replica {
	t.Helper()
	opt.FS, opt.Dir = fs, "data"
	if opt.Logger == nil {
		opt.Logger = quiet()
	}
	r, err := Open(opt)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// restartAfterPowerLoss closes r, drops everything mem did not make
// durable, and opens the replica again.
func restartAfterPowerLoss(t *testing.T, r *Replica, mem *vfs.Mem) *Replica {
	t.Helper()
	r.Close()
	mem.Crash()
	return open(t, mem, Options{})
}

func set(t *testing.T, r *Replica, kv ...string) []store.Result {
	t.Helper()
	var b store.Batch
	for i := 0; i < len(kv); i += 2 {
		b.Add(store.OpSet, 0, []byte(kv[i]), []byte(kv[i+1]))
	}
	var res []store.Result
	err := r.Apply(context.Background(), b.Bytes(), func(_ int, r store.Result) { res = append(res, r) })
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func get(t *testing.T, r *Replica, key string) string {
	t.Helper()
	if err := r.ReadBarrier(context.Background()); err != nil {
		t.Fatal(err)
	}
	v, ok := r.Store().Get([]byte(key))
	if !ok {
		return "<nil>"
	}
	return string(v)
}

func TestApplyAndRestart(t *testing.T) {
	fs := vfs.NewMem()
	r := open(t, fs, Options{})
	if res := set(t, r, "a", "1", "b", "2"); len(res) != 2 || !res[0].Done {
		t.Fatalf("results %+v", res)
	}
	if got := get(t, r, "a"); got != "1" {
		t.Fatalf("a = %s", got)
	}
	r.Close()
	r = open(t, fs, Options{})
	defer r.Close()
	if got := get(t, r, "b"); got != "2" {
		t.Fatalf("after restart b = %s", got)
	}
}

func TestSnapshotsAndRelease(t *testing.T) {
	fs := vfs.NewMem()
	opt := Options{SnapshotEntries: 50, SegmentSize: 4 << 10}
	r := open(t, fs, opt)
	for i := range 500 {
		set(t, r, fmt.Sprintf("k%03d", i), fmt.Sprint(i))
	}
	r.Close()
	snaps, _ := fs.ReadDir("data/snap")
	segs, _ := fs.ReadDir("data/wal")
	if len(snaps) != 2 || len(segs) > 10 {
		t.Fatalf("snapshots %v, %d segments", snaps, len(segs))
	}
	r = open(t, fs, opt)
	defer r.Close()
	for i := range 500 {
		if got := get(t, r, fmt.Sprintf("k%03d", i)); got != fmt.Sprint(i) {
			t.Fatalf("k%03d = %s", i, got)
		}
	}
}

// TestAppliedEntriesLeaveMemory applies three times keptEntries writes with
// no snapshot due, and checks that raft's in-memory log holds at most twice
// keptEntries applied entries; then that a snapshot taken after it trimmed,
// and a restart, still find every write.
func TestAppliedEntriesLeaveMemory(t *testing.T) {
	fs := vfs.NewMem()
	r := open(t, fs, Options{SnapshotEntries: 1 << 40, SnapshotBytes: 1 << 40})
	const n = 3 * keptEntries
	for i := range n {
		set(t, r, fmt.Sprintf("k%05d", i), fmt.Sprint(i))
	}
	// set returns once its entry is applied, which can be before the apply
	// thread trims after it: so up to 2*keptEntries, not 2*keptEntries-1.
	first, err := r.storage.FirstIndex()
	if applied := r.applied.Load(); err != nil || applied-first > 2*keptEntries {
		t.Fatalf("first index in memory %d (%v), applied %d: over %d applied entries kept", first, err, applied, 2*keptEntries)
	}
	r.Close()

	// The n entries replayed at the restart make a snapshot due at once,
	// which compacts the in-memory log to them; 2*keptEntries writes later
	// the apply thread trims it, and the next snapshot, due 2.5 times
	// keptEntries after the first, reads its entry from the trimmed log.
	const m = 3 * keptEntries
	r = open(t, fs, Options{SnapshotEntries: 5 * keptEntries / 2})
	for i := n; i < n+m; i++ {
		set(t, r, fmt.Sprintf("k%05d", i), fmt.Sprint(i))
	}
	r.snaps.wait()
	last := r.snaps.newest()
	if want := uint64(n + 5*keptEntries/2); last.err != nil || last.index < want {
		t.Fatalf("the newest snapshot is at index %d (%v); want the one after the restart's, at %d or later", last.index, last.err, want)
	}
	if st, err := r.storage.Snapshot(); err != nil || st.Metadata.Index != last.index {
		t.Fatalf("raft's storage holds the snapshot at index %d (%v); want the newest, at %d", st.Metadata.Index, err, last.index)
	}
	r.Close()
	r = open(t, fs, Options{})
	defer r.Close()
	if err := r.ReadBarrier(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := range n + m {
		if v, _ := r.Store().Get([]byte(fmt.Sprintf("k%05d", i))); string(v) != fmt.Sprint(i) {
			t.Fatalf("after restart k%05d = %q", i, v)
		}
	}
}

// TestTrimWaitsForSnapshot holds a snapshot's fsync while more than twice
// keptEntries writes are applied: raft's in-memory log must keep the entry
// at the snapshot's index, which CreateSnapshot reads once the file is
// written, and trim again after.
func TestTrimWaitsForSnapshot(t *testing.T) {
	hold := &holdSyncFS{}
	fs := wrapFS{vfs.NewMem(), ".snap.tmp", func(f vfs.File) vfs.File { return &holdSyncFile{File: f, fs: hold} }}
	r := open(t, fs, Options{SnapshotEntries: 1 << 40, SnapshotBytes: 1 << 40})
	defer r.Close()
	set(t, r, "k", "v")
	at := r.applied.Load()

	hold.hold()
	defer hold.release() // first, if the test fails: Close waits for the snapshot
	saved := make(chan error, 1)
	go func() { saved <- r.Snapshot() }()
	<-hold.held // the snapshot of index at waits
	for i := range 2*keptEntries + 10 {
		set(t, r, fmt.Sprintf("k%05d", i), "v")
	}
	if first, err := r.storage.FirstIndex(); err != nil || first > at {
		t.Fatalf("while the snapshot of index %d was written, the in-memory log was trimmed to start at %d (%v)", at, first, err)
	}
	hold.release()
	if err := <-saved; err != nil {
		t.Fatal(err)
	}
	// The snapshot trimmed the log to its index, over 2*keptEntries behind
	// applied: the apply thread trims it again after the next entry.
	set(t, r, "after", "v")
	set(t, r, "after2", "v")
	first, _ := r.storage.FirstIndex()
	if applied := r.applied.Load(); first <= at || applied-first > 2*keptEntries {
		t.Fatalf("after the snapshot of index %d, the in-memory log starts at %d with %d applied", at, first, applied)
	}
}

// TestBackgroundSnapshot holds a background snapshot's fsync and asks for
// more meanwhile: none starts. SAVE then waits for the held one and writes
// its own.
func TestBackgroundSnapshot(t *testing.T) {
	hold := &holdSyncFS{}
	var made atomic.Int64 // snapshot files created
	fs := wrapFS{vfs.NewMem(), ".snap.tmp", func(f vfs.File) vfs.File {
		made.Add(1)
		return &holdSyncFile{File: f, fs: hold}
	}}
	r := open(t, fs, Options{SnapshotEntries: 1 << 40, SnapshotBytes: 1 << 40})
	defer r.Close()
	set(t, r, "k", "v")
	base := made.Load()

	hold.hold()
	defer hold.release() // first, if the test fails: Close waits for the snapshot
	if started, err := r.BackgroundSnapshot(); !started || err != nil {
		t.Fatalf("BackgroundSnapshot with none running = %v, %v; want it started", started, err)
	}
	<-hold.held
	for range 100 {
		if started, err := r.BackgroundSnapshot(); started || err != nil {
			t.Fatalf("BackgroundSnapshot while one is written = %v, %v; want none started", started, err)
		}
	}
	hold.release()
	if err := r.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if n := made.Load() - base; n != 2 {
		t.Fatalf("%d snapshots written, want the held one and SAVE's", n)
	}
}
