package replica

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
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
	err := r.Apply(b.Bytes(), func(_ int, r store.Result) { res = append(res, r) })
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func get(t *testing.T, r *Replica, key string) string {
	t.Helper()
	if err := r.ReadBarrier(); err != nil {
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
// no snapshot due, and checks that raft's in-memory log holds fewer than
// twice keptEntries applied entries; then that snapshots taken while it
// trims, and a restart, still find every write.
func TestAppliedEntriesLeaveMemory(t *testing.T) {
	fs := vfs.NewMem()
	r := open(t, fs, Options{SnapshotEntries: 1 << 40, SnapshotBytes: 1 << 40})
	const n = 3 * keptEntries
	for i := range n {
		set(t, r, fmt.Sprintf("k%05d", i), fmt.Sprint(i))
	}
	first, err := r.storage.FirstIndex()
	if applied := r.applied.Load(); err != nil || applied-first >= 2*keptEntries {
		t.Fatalf("first index in memory %d (%v), applied %d: over %d applied entries kept", first, err, applied, 2*keptEntries)
	}
	r.Close()

	r = open(t, fs, Options{SnapshotEntries: 300}) // replays n entries into memory: it trims at once
	for i := n; i < n+keptEntries; i++ {
		set(t, r, fmt.Sprintf("k%05d", i), fmt.Sprint(i))
	}
	if err := r.Snapshot(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	r = open(t, fs, Options{})
	defer r.Close()
	if err := r.ReadBarrier(); err != nil {
		t.Fatal(err)
	}
	for i := range n + keptEntries {
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
	fs := snapTmpFS{vfs.NewMem(), func(f vfs.File) vfs.File { return &holdSyncFile{File: f, fs: hold} }}
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
	set(t, r, "after", "v")
	if first, _ := r.storage.FirstIndex(); first <= at {
		t.Fatalf("after the snapshot, the in-memory log still starts at %d, at or before its index %d", first, at)
	}
}

// snapTmpFS is FS, but for the snapshot files it creates (*.tmp under snap),
// which wrap wraps.
type snapTmpFS struct {
	vfs.FS
	wrap func(vfs.File) vfs.File
}

func (s snapTmpFS) Create(name string) (vfs.File, error) {
	f, err := s.FS.Create(name)
	if err != nil || !strings.HasSuffix(name, ".tmp") || !strings.Contains(name, "snap") {
		return f, err
	}
	return s.wrap(f), nil
}
