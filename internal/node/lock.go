package node

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/flintkv/flint/internal/vfs"
)

// lockDir takes an exclusive lock on dir/LOCK, made with dir if needed
// (durably, as the replica would make it), and holds it until the file is
// closed or the process ends, so that two servers never share a data
// directory: each would write over the other's log. It fails at once if
// another process holds the lock. If the disk is too full to make them, it
// says so, once, and tries again every retryLock.
func lockDir(dir string, logger *slog.Logger) (*os.File, error) {
	var f *os.File
	err := vfs.RetryNoSpace(func() (err error) {
		if err = vfs.MkdirAll(vfs.OS, dir); err == nil {
			f, err = os.OpenFile(filepath.Join(dir, "LOCK"), os.O_RDWR|os.O_CREATE, 0o644)
		}
		return err
	}, waitForSpace(logger, dir, "make its data directory"))
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another process is using it: it holds the lock on %s", f.Name())
		}
		return nil, fmt.Errorf("locking %s: %w", f.Name(), err)
	}
	return f, nil
}

// waitForSpace returns what a write that must be made before the node can
// serve calls when it finds the disk full: it says so once, naming what
// it must write, and waits retryLock before the write is tried again.
func waitForSpace(logger *slog.Logger, dir, what string) func(error) bool {
	logged := false
	return func(err error) bool {
		if !logged {
			logger.Error("the disk is full: the node cannot start serving until space is freed, "+
				"as it must "+what+" first", "dir", dir, "err", err)
			logged = true
		}
		time.Sleep(retryLock)
		return true
	}
}

// retryLock is how often lockDir tries again to make a data directory on a
// full disk.
const retryLock = time.Second
