package vfs

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Sync makes the file's data durable with fdatasync, which also writes the
// metadata needed to read the data back (the size) but not the times, and
// so costs one journal write less than fsync on ext4 and xfs.
func (f osFile) Sync() error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}

// DropCache asks the kernel to evict the file's clean cached pages
// (POSIX_FADV_DONTNEED); it leaves dirty pages, and pages mapped by a
// process.
func (f osFile) DropCache() error {
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return &os.PathError{Op: "fadvise", Path: f.Name(), Err: err}
	}
	return nil
}
