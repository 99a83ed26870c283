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
	return f.fdatasync(func() error { return syscall.Fdatasync(int(f.Fd())) })
}

var _ heldSyncer = osFile{}

// syncHeld is Sync through a raw system call, which keeps the calling
// goroutine's processor (see SyncHeld). The descriptor is used through
// SyscallConn, which keeps it open during the call: a file closed before
// fails, as a closed file's Sync does.
func (f osFile) syncHeld() error {
	rc, err := f.SyscallConn()
	if err != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
	}
	return f.fdatasync(func() error {
		var errno syscall.Errno
		if err := rc.Control(func(fd uintptr) {
			_, _, errno = syscall.RawSyscall(syscall.SYS_FDATASYNC, fd, 0, 0)
		}); err != nil {
			return err
		}
		if errno != 0 {
			return errno
		}
		return nil
	})
}

// fdatasync calls sync until it is not interrupted, and names the file in
// its error.
func (f osFile) fdatasync(sync func() error) error {
	for {
		err := sync()
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
