package vfs

import (
	"fmt"
	"io"
	"sync/atomic"
)

// Map returns the contents of f, from offset 0 to its current size, as
// bytes that stay valid and unchanged for the life of the process, even
// after f is closed or removed: callers may keep slices of them instead of
// copies. A file of the OS filesystem is mapped read-only, so its bytes are
// read from disk as they are first touched, and live in the page cache, not
// the heap; the disk space of a mapped file stays in use until the process
// exits, even after the file is removed. Other files are read into new
// memory.
//
// The bytes of a mapped file are the file's: the caller must never write
// to, or truncate away, the range it mapped and still uses. Appending
// beyond it is safe.
func Map(f File) ([]byte, error) {
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	if size == 0 {
		return nil, nil
	}
	if m, ok := f.(mapper); ok {
		if b, err := m.mapAll(size); err == nil {
			mapped.Add(size)
			return b, nil
		}
		// Not every filesystem can map files: read it instead.
	}
	b := make([]byte, size)
	if n, err := f.ReadAt(b, 0); n < len(b) {
		if err == nil || err == io.EOF {
			err = fmt.Errorf("file shrank from %d to %d bytes while it was read", size, n)
		}
		return nil, err
	}
	return b, nil
}

// mapper is a File that can map its contents into memory.
type mapper interface {
	mapAll(size int64) ([]byte, error)
}

// mapped is the sum of the sizes of the files Map has mapped.
var mapped atomic.Int64

// MappedBytes returns how many bytes of files Map has mapped in this
// process: the most disk space that removed files may still hold.
func MappedBytes() int64 { return mapped.Load() }
