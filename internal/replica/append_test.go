package replica

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/vfs"
	"github.com/flintkv/flint/internal/wal"
)

// TestEveryLogWriteSynced checks that each write to a log segment is
// fsynced before the next one: none rides unsynced on a later fsync, as a
// commit-only hard state once did, so that damage to any write but the
// last tells itself apart from a torn write (see package wal).
func TestEveryLogWriteSynced(t *testing.T) {
	fs := &syncCheckFS{FS: vfs.NewMem()}
	r := open(t, fs, Options{})
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

// syncCheckFS counts the writes to log segments (*.wal, opened as such)
// that follow a write to the same file not yet fsynced.
type syncCheckFS struct {
	vfs.FS
	writes, unsynced atomic.Int64
}

func (c *syncCheckFS) Create(name string) (vfs.File, error) { return c.wrap(name)(c.FS.Create(name)) }
func (c *syncCheckFS) OpenRW(name string) (vfs.File, error) { return c.wrap(name)(c.FS.OpenRW(name)) }

func (c *syncCheckFS) wrap(name string) func(vfs.File, error) (vfs.File, error) {
	return func(f vfs.File, err error) (vfs.File, error) {
		if err != nil || !strings.HasSuffix(name, ".wal") {
			return f, err
		}
		return &syncCheckFile{File: f, fs: c}, nil
	}
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
