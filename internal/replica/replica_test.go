package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"

	"go.etcd.io/raft/v3"

	"github.com/flintkv/flint/internal/batchentry"
	"github.com/flintkv/flint/internal/snap"
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

// TestLogReadableBackToOlderSnapshot writes across several snapshots and
// checks what raft's storage serves a follower: every entry after the
// older of the two kept snapshots, read back from the log, with their data
// as written; entries the older snapshot covers are compacted. A restart
// then finds every write.
func TestLogReadableBackToOlderSnapshot(t *testing.T) {
	fs := vfs.NewMem()
	r := open(t, fs, Options{SnapshotEntries: 300, SegmentSize: 64 << 10})
	const n = 1000
	for i := range n {
		set(t, r, fmt.Sprintf("k%05d", i), fmt.Sprint(i))
	}
	r.snaps.wait()
	snaps, err := snap.List(fs, r.snapDir())
	if err != nil || len(snaps) != 2 {
		t.Fatalf("snapshots %v (%v), want the two newest", snaps, err)
	}
	first, err := r.storage.FirstIndex()
	if err != nil || first != snaps[0].Index+1 {
		t.Fatalf("raft's log starts at %d (%v), want %d, just after the older snapshot", first, err, snaps[0].Index+1)
	}
	last, _ := r.storage.LastIndex()
	ents, err := r.storage.Entries(first, last+1, 1<<40)
	if err != nil || uint64(len(ents)) != last+1-first {
		t.Fatalf("Entries(%d, %d) = %d entries (%v)", first, last+1, len(ents), err)
	}
	// Each set is one entry: the entries are the last writes, in order.
	for i, e := range ents {
		key := fmt.Sprintf("k%05d", n-len(ents)+i)
		if err := batchentry.Each(e.Data, func(uint64, []byte) error { return nil }); err != nil || !bytes.Contains(e.Data, []byte(key)) {
			t.Fatalf("entry %d read back from the log (%v) does not set %s", e.Index, err, key)
		}
	}
	if _, err := r.storage.Entries(first-1, first, 1<<40); !errors.Is(err, raft.ErrCompacted) {
		t.Fatalf("an entry the older snapshot covers: %v, want raft.ErrCompacted", err)
	}
	r.Close()
	r = open(t, fs, Options{})
	defer r.Close()
	for i := range n {
		if got := get(t, r, fmt.Sprintf("k%05d", i)); got != fmt.Sprint(i) {
			t.Fatalf("after restart k%05d = %q", i, got)
		}
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
