// Package vfs is the small filesystem interface that Flint's log and
// snapshots use, so that tests can replace the disk.
//
// OS is the real filesystem. Mem is an in-memory filesystem that can crash:
// Crash drops every byte and every directory change that was not made durable
// by File.Sync or FS.SyncDir, as a power loss would. Faulty wraps another FS
// and fails chosen operations, for testing error paths.
//
// Durability contract, which Mem enforces and code using an FS must follow:
// data written to a file survives a crash only after File.Sync returns nil;
// a file's or directory's creation, and a file's removal or rename, survive
// only after SyncDir on its directory returns nil. MkdirAll makes the
// directories it creates durable.
package vfs

import (
	"errors"
	"io"
	"io/fs"
	"path"
	"runtime"
	"syscall"
)

// FS is a filesystem. Names are slash-separated paths.
type FS interface {
	// Create creates name, or truncates it if it exists, open for reading
	// and writing.
	Create(name string) (File, error)
	// Open opens an existing file for reading.
	Open(name string) (File, error)
	// OpenRW opens an existing file for reading and writing.
	OpenRW(name string) (File, error)
	// Rename renames oldname to newname, replacing newname atomically.
	Rename(oldname, newname string) error
	// Remove removes a file.
	Remove(name string) error
	// ReadDir returns the names of the entries in dir, sorted.
	ReadDir(dir string) ([]string, error)
	// Mkdir creates the directory dir, whose parent must exist. It fails
	// with an error matching fs.ErrExist if dir exists, as a directory or
	// a file.
	Mkdir(dir string) error
	// SyncDir makes the creations, removals and renames in dir durable.
	SyncDir(dir string) error
}

// File is an open file.
type File interface {
	io.Reader
	io.ReaderAt
	io.WriterAt
	// Sync makes everything written so far durable.
	Sync() error
	// Truncate changes the size of the file.
	Truncate(size int64) error
	// Size returns the current size of the file.
	Size() (int64, error)
	// DropCache evicts the file's clean pages from the page cache, so that
	// reads come from the disk. After a failed fsync, Linux may keep the
	// data it could not write as clean pages (ext4 does), which reads return
	// and no later fsync writes: a process that reads a file another one
	// failed to sync must sync it, then drop its cache, to read what the
	// disk holds. It is best effort, and says nothing of what it left:
	// Linux keeps pages that are dirty, being written or mapped by any
	// process (a process's mappings end when it exits).
	DropCache() error
	Close() error
}

// ErrNoSpace is the error of a write that found the disk full. Errors from
// every FS here match it with errors.Is when the disk is full.
var ErrNoSpace error = syscall.ENOSPC

// IsNoSpace reports whether err means the disk is full, or the user's disk
// quota is (EDQUOT): either way, writes may succeed once space is freed.
func IsNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// RetryNoSpace calls write until it returns nil or an error other than a
// full disk (IsNoSpace), or until wait, called with each full-disk error,
// returns false; it returns write's last error. write must leave things so
// that it may be called again after a full disk.
func RetryNoSpace(write func() error, wait func(err error) bool) error {
	for {
		err := write()
		if err == nil || !IsNoSpace(err) || !wait(err) {
			return err
		}
	}
}

// SyncHeld is f.Sync for a goroutine that has urgent work the moment the
// sync returns, as the log's writer does: every write acknowledged by the
// group waits for it, and the next group's write waits to start. On a real
// file, when the program has more than one processor (GOMAXPROCS), it keeps
// the calling goroutine's processor through the system call. An ordinary
// system call lets the Go scheduler hand the processor to other goroutines
// while it blocks, and the goroutine, once the call returns, queues behind
// every runnable goroutine for one; under load, with a connection's
// goroutine per client, that queue is long. Measured in docs/PERFORMANCE.md
// ("The log's fsync keeps its processor").
//
// The price: while the call is in the kernel, its processor runs nothing
// else, and the runtime cannot stop the goroutine. So anything that stops
// the world (a collection's start and end, runtime.ReadMemStats, profiles
// and traces) and the collector's scan of the goroutine's stack wait for
// the fsync to end; a disk that never answered would hold up every
// goroutine at the next collection, not only writes. And the runtime
// signals the goroutine to preempt it, as it would one that computes: where
// fdatasync can be interrupted (FUSE, some network filesystems), it is then
// made again from the start. With one processor, holding it would stop
// every goroutine for each fsync: SyncHeld then is f.Sync.
func SyncHeld(f File) error {
	if h, ok := holds(f); ok {
		return h.syncHeld()
	}
	return f.Sync()
}

// heldSyncer is a File that can sync keeping its processor: a real file.
type heldSyncer interface{ syncHeld() error }

// holds returns f as a heldSyncer if SyncHeld keeps the processor for it.
func holds(f File) (heldSyncer, bool) {
	h, ok := f.(heldSyncer)
	return h, ok && runtime.GOMAXPROCS(0) > 1
}

// MkdirAll creates dir and any missing parents in fsys, durably: it syncs
// the parent of each directory on the path below the root, or below the
// last "..", which names an ancestor of the working directory, so that dir
// survives a crash once MkdirAll returns nil, even if an earlier process
// made some of them and crashed before syncing. A file named dir fails it
// (ENOTDIR), as one named like a parent does. The path is taken as
// path.Clean reads it, as path.Join does: "a/../b" is "b", whatever a is.
func MkdirAll(fsys FS, dir string) error {
	dir = path.Clean(dir)
	if err := mkdirAll(fsys, dir); err != nil {
		return err
	}
	_, err := fsys.ReadDir(dir) // Mkdir took a file named dir for a directory
	return err
}

// mkdirAll is MkdirAll without the check that dir is a directory. The
// parent of a directory that was there already is synced too, in case an
// earlier process made it and crashed before syncing; but an error there
// is not one: that parent may be one this process may not open (mode
// 0711, say), made long before and durable.
func mkdirAll(fsys FS, dir string) error {
	parent := path.Dir(dir)
	if parent == dir || path.Base(dir) == ".." { // a root, or an ancestor of the working directory
		return nil
	}
	if err := mkdirAll(fsys, parent); err != nil {
		return err
	}
	err := fsys.Mkdir(dir)
	if errors.Is(err, fs.ErrExist) {
		_ = fsys.SyncDir(parent) // best effort: see above
		return nil
	}
	if err != nil {
		return err
	}
	return fsys.SyncDir(parent)
}
