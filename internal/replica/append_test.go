package replica

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/vfs"
	"github.com/flintkv/flint/internal/wal"
)

// TestEveryLogWriteSynced checks that each write to a log segment is
// fsynced before the next one: none rides unsynced on a later fsync, as a
// commit-only hard state once did, so that damage to any write but the
// last tells itself apart from a torn write (see package wal).
func TestEveryLogWriteSynced(t *testing.T) {
	fs := &syncCheckFS{}
	r := open(t, wrapFS{vfs.NewMem(), ".wal", func(f vfs.File) vfs.File { return &syncCheckFile{File: f, fs: fs} }}, Options{})
	for i := range 50 {
		set(t, r, "k", strings.Repeat("v", i))
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if n := fs.unsynced.Load(); n > 0 {
		t.Fatalf("%d writes to log segments followed a write that was not fsynced", n)
	}
	if fs.writes.Load() < 50 {
		t.Fatalf("test bug: %d writes to log segments seen", fs.writes.Load())
	}
}

// TestNoCommitOnlyWrites has 16 clients write at once, so that raft often
// asks to hear back about a hard state that only moves the commit index,
// and checks that the log holds no such write: no hard state record
// follows another, with no entry between, changing only the commit index.
func TestNoCommitOnlyWrites(t *testing.T) {
	m := vfs.NewMem()
	r := open(t, m, Options{})
	var wg sync.WaitGroup
	for c := range 16 {
		wg.Go(func() {
			for i := range 100 {
				set(t, r, fmt.Sprintf("k%d", c), fmt.Sprint(i))
			}
		})
	}
	wg.Wait()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	var last *raftpb.HardState // the last hard state record, if no entry followed it
	records, commitOnly := 0, 0
	w, err := wal.Open(m, "data/wal", wal.Options{Logger: quiet()}, 1, wal.Replay{
		Entry: func(raftpb.Entry) error { records++; last = nil; return nil },
		HardState: func(hs raftpb.HardState) error {
			records++
			if last != nil && hs.Term == last.Term && hs.Vote == last.Vote && hs.Commit != last.Commit {
				commitOnly++
			}
			last = &hs
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if commitOnly > 0 || records < 100 {
		t.Fatalf("%d of the log's %d records are writes of a new commit index alone", commitOnly, records)
	}
}

// wrapFS is FS, but for the files it creates or opens for writing whose
// names end in suffix (".wal": log segments; ".snap.tmp": snapshots being
// written), which wrap wraps.
type wrapFS struct {
	vfs.FS
	suffix string
	wrap   func(vfs.File) vfs.File
}

func (w wrapFS) Create(name string) (vfs.File, error) { return w.wrapped(name)(w.FS.Create(name)) }
func (w wrapFS) OpenRW(name string) (vfs.File, error) { return w.wrapped(name)(w.FS.OpenRW(name)) }

func (w wrapFS) wrapped(name string) func(vfs.File, error) (vfs.File, error) {
	return func(f vfs.File, err error) (vfs.File, error) {
		if err != nil || !strings.HasSuffix(name, w.suffix) {
			return f, err
		}
		return w.wrap(f), nil
	}
}

// syncCheckFS counts, through its files, the writes to log segments that
// follow a write to the same file not yet fsynced.
type syncCheckFS struct {
	writes, unsynced atomic.Int64
}

type syncCheckFile struct {
	vfs.File
	fs    *syncCheckFS
	dirty bool
}

func (f *syncCheckFile) WriteAt(b []byte, off int64) (int, error) {
	f.fs.writes.Add(1)
	if f.dirty {
		f.fs.unsynced.Add(1)
	}
	f.dirty = true
	return f.File.WriteAt(b, off)
}

func (f *syncCheckFile) Sync() error {
	err := f.File.Sync()
	if err == nil {
		f.dirty = false
	}
	return err
}

// TestBatchesDuringAWriteMakeOneEntry holds a log fsync and proposes
// batches meanwhile: the raft loop must propose them together, as one
// entry, once the write is done, rather than one entry each.
func TestBatchesDuringAWriteMakeOneEntry(t *testing.T) {
	fs := &holdSyncFS{}
	r := open(t, wrapFS{vfs.NewMem(), ".wal", func(f vfs.File) vfs.File { return &holdSyncFile{File: f, fs: fs} }}, Options{})
	defer r.Close()
	set(t, r, "k", "0") // the node leads, and its term is written
	before := r.wal.Metrics().LastIndex

	fs.hold()
	defer fs.release() // first, if the test fails: Close waits for the held fsync
	first := make(chan error, 1)
	go func() { first <- r.Apply(context.Background(), batchOf("first", "1"), nil) }()
	<-fs.held // the first batch's fsync waits
	const n = 10
	var ps []*proposal
	for i := range n { // one at a time, each taken by the loop before the next
		p := &proposal{id: r.newID(), batch: batchOf(fmt.Sprint("k", i), "v"), applied: make(chan struct{})}
		ps = append(ps, p)
		r.propc <- p
		waitTaken(t, r)
	}
	fs.release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for i, p := range ps {
		select {
		case <-p.applied:
		case <-time.After(10 * time.Second):
			t.Fatalf("batch %d not applied after 10 s", i)
		}
		if p.err != nil {
			t.Fatalf("batch %d: %v", i, p.err)
		}
		if got := get(t, r, fmt.Sprint("k", i)); got != "v" {
			t.Fatalf("k%d = %s", i, got)
		}
	}
	if got := r.wal.Metrics().LastIndex - before; got != 2 {
		t.Errorf("the first batch and %d proposed during its write took %d entries, want 2", n, got)
	}
}

// holdSyncFS makes, through the files it wraps (log segments or snapshots,
// as the test chooses), the next fsync after hold wait until release, and
// says on held when it starts waiting.
type holdSyncFS struct {
	mu    sync.Mutex
	gate  chan struct{} // closed by release
	once  *sync.Once    // closes gate
	held  chan struct{}
	armed bool
}

func (h *holdSyncFS) hold() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gate, h.once, h.held, h.armed = make(chan struct{}), new(sync.Once), make(chan struct{}), true
}

// release lets the held fsync go on; a second call does nothing.
func (h *holdSyncFS) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.once.Do(func() { close(h.gate) })
}

type holdSyncFile struct {
	vfs.File
	fs *holdSyncFS
}

func (f *holdSyncFile) Sync() error {
	f.fs.mu.Lock()
	armed, gate, held := f.fs.armed, f.fs.gate, f.fs.held
	f.fs.armed = false
	f.fs.mu.Unlock()
	if armed {
		close(held)
		<-gate
	}
	return f.File.Sync()
}

// TestAppendQueueBounded holds a log fsync while entries come faster than
// maxAppendBytes lets wait for the append thread: the raft loop hands it
// the first, holds the next back until that write is done, then hands it
// over alone although it is larger than the bound. So a member holds no
// more than the bound of entries it has not written (or one entry),
// whatever its leader, or its own clients, send.
func TestAppendQueueBounded(t *testing.T) {
	defer func(n int64) { maxAppendBytes = n }(maxAppendBytes)
	maxAppendBytes = 4 << 20
	r, fs := heldReplica(t)
	defer r.Close()
	fs.hold()
	defer fs.release() // first, if the test fails: Close waits for the held fsync
	done := make(chan error, 2)
	go func() { done <- r.Apply(context.Background(), batchOf("a", strings.Repeat("a", 1<<20)), nil) }()
	<-fs.held
	first := r.appendBytes.Load() // the entry being written
	if first < 1<<20 || first > maxAppendBytes || r.stats.appendWaits.Load() != 0 {
		t.Fatalf("with the first write held: %d bytes handed to the append thread, %d waits", first, r.stats.appendWaits.Load())
	}
	// A batch of maxEntryBytes is proposed at once, even during a write.
	big := strings.Repeat("b", maxEntryBytes)
	go func() { done <- r.Apply(context.Background(), batchOf("b", big), nil) }()
	for deadline := time.Now().Add(10 * time.Second); r.stats.appendWaits.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the raft loop did not hold back an entry of %d bytes with %d of %d unwritten", len(big), first, maxAppendBytes)
		}
	}
	if got := r.appendBytes.Load(); got != first {
		t.Fatalf("while the loop holds back an entry: %d bytes handed to the append thread, want %d", got, first)
	}
	fs.release()
	for range 2 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a write was not applied within 10 s of the fsync's release")
		}
	}
	if got := r.appendBytes.Load(); got != 0 {
		t.Fatalf("%d bytes still counted as handed to the append thread once every write is applied", got)
	}
	if got := get(t, r, "b"); got != big {
		t.Fatalf("b holds %d bytes, want %d", len(got), len(big))
	}
}
