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
	return f.fdatasync(syscall.Fdatasync)
}

// syncHeld is Sync through a raw system call, which keeps the calling
// goroutine's processor (see SyncHeld).
func (f osFile) syncHeld() error {
	return f.fdatasync(func(fd int) error {
		if _, _, errno := syscall.RawSyscall(syscall.SYS_FDATASYNC, uintptr(fd), 0, 0); errno != 0 {
			return errno
		}
		return nil
	})
}

// fdatasync calls sync on the file's descriptor until it is not
// interrupted, and names the file in its error.
func (f osFile) fdatasync(sync func(fd int) error) error {
	for {
		err := sync(int(f.Fd()))
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
