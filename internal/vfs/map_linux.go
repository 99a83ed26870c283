package vfs

import (
	"math"
	"os"
	"syscall"
)

// mapAll maps the first size bytes of f read-only and shared, so that the
// pages are the page cache's. The mapping is never removed: see Map.
func (f osFile) mapAll(size int64) ([]byte, error) {
	if size > math.MaxInt {
		return nil, &os.PathError{Op: "mmap", Path: f.Name(), Err: syscall.EFBIG}
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, &os.PathError{Op: "mmap", Path: f.Name(), Err: err}
	}
	return b, nil
}
