package replica

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flintkv/flint/internal/vfs"
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
