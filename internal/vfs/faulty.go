package vfs

import "sync"

// Faulty is an FS that passes every operation to another FS but fails the
// ones a test arms it to fail. It is safe for concurrent use.
//
// A fault applies only to the files, and for FailSyncDir and FailMkdir the
// directories, whose names the filter accepts. A file's name is the one it was opened
// with, as given, even after a Rename.
type Faulty struct {
	fs FS

	mu         sync.Mutex
	filter     func(name string) bool // nil accepts every name
	syncErr    error                  // the error of File.Sync, if not nil
	syncDirErr error                  // the error of SyncDir, if not nil
	mkdirErr   error                  // the error of Mkdir, if not nil
	writeErr   error                  // the error of WriteAt, if not nil
	// budgetErr, if not nil, is the error of writes past budget bytes.
	budgetErr error
	budget    int64 // bytes writable before budgetErr; >= 0
	syncs     int64 // successful File.Syncs
}

// faultyFile is a file opened through a Faulty.
type faultyFile struct {
	File
	f    *Faulty
	name string // as opened, for the filter
}

// NewFaulty returns a Faulty passing operations to fs, with no fault armed.
func NewFaulty(fs FS) *Faulty { return &Faulty{fs: fs} }

// SetFilter makes faults apply only to names for which match returns true,
// or to every name if match is nil. match is called with f locked, so it
// must not call f's methods.
func (f *Faulty) SetFilter(match func(name string) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.filter = match
}

// FailSync makes every later File.Sync return err without syncing. On a
// Mem file, the unsynced data then stays as a failed writeback leaves it on
// Linux: read back until DropCache, and never made durable by a later Sync.
func (f *Faulty) FailSync(err error) { f.arm(&f.syncErr, err) }

// FailSyncDir makes every later SyncDir return err without syncing.
func (f *Faulty) FailSyncDir(err error) { f.arm(&f.syncDirErr, err) }

// FailMkdir makes every later Mkdir return err without making the
// directory.
func (f *Faulty) FailMkdir(err error) { f.arm(&f.mkdirErr, err) }

// FailWrite makes every later WriteAt return 0 and err without writing.
func (f *Faulty) FailWrite(err error) { f.arm(&f.writeErr, err) }

// arm sets the fault *fault to err.
func (f *Faulty) arm(fault *error, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	*fault = err
}

// FailAfterBytes lets WriteAt write n more bytes in all, then fail with err:
// the write that crosses the limit writes the bytes that fit and returns
// err, and later writes of at least one byte write nothing and return err.
// Only writes to names the filter accepts count.
func (f *Faulty) FailAfterBytes(n int64, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.budget, f.budgetErr = max(0, n), err
}

// Heal disarms every fault. It keeps the filter.
func (f *Faulty) Heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.syncErr, f.syncDirErr, f.mkdirErr, f.writeErr, f.budgetErr, f.budget = nil, nil, nil, nil, nil, 0
}

// Syncs returns the number of File.Syncs that succeeded.
func (f *Faulty) Syncs() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.syncs
}

// fault returns the armed fault if it applies to name. f.mu must be held.
func (f *Faulty) fault(armed error, name string) error {
	if armed != nil && (f.filter == nil || f.filter(name)) {
		return armed
	}
	return nil
}

// Create creates name in the wrapped FS.
func (f *Faulty) Create(name string) (File, error) { return f.wrap(name)(f.fs.Create(name)) }

// Open opens name in the wrapped FS for reading.
func (f *Faulty) Open(name string) (File, error) { return f.wrap(name)(f.fs.Open(name)) }

// OpenRW opens name in the wrapped FS for reading and writing.
func (f *Faulty) OpenRW(name string) (File, error) { return f.wrap(name)(f.fs.OpenRW(name)) }

// wrap returns a function that wraps the result of opening name.
func (f *Faulty) wrap(name string) func(File, error) (File, error) {
	return func(file File, err error) (File, error) {
		if err != nil {
			return nil, err
		}
		return &faultyFile{File: file, f: f, name: name}, nil
	}
}

// Rename renames oldname to newname in the wrapped FS.
func (f *Faulty) Rename(oldname, newname string) error { return f.fs.Rename(oldname, newname) }

// Remove removes name in the wrapped FS.
func (f *Faulty) Remove(name string) error { return f.fs.Remove(name) }

// ReadDir lists dir in the wrapped FS.
func (f *Faulty) ReadDir(dir string) ([]string, error) { return f.fs.ReadDir(dir) }

// Mkdir creates dir in the wrapped FS unless a FailMkdir fault applies.
func (f *Faulty) Mkdir(dir string) error {
	if err := f.dirFault(&f.mkdirErr, dir); err != nil {
		return err
	}
	return f.fs.Mkdir(dir)
}

// SyncDir syncs dir in the wrapped FS unless a FailSyncDir fault applies.
func (f *Faulty) SyncDir(dir string) error {
	if err := f.dirFault(&f.syncDirErr, dir); err != nil {
		return err
	}
	return f.fs.SyncDir(dir)
}

// dirFault returns the fault *armed if it applies to dir.
func (f *Faulty) dirFault(armed *error, dir string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fault(*armed, dir)
}

// Sync syncs the wrapped file unless a FailSync fault applies.
func (ff *faultyFile) Sync() error {
	f := ff.f
	f.mu.Lock()
	err := f.fault(f.syncErr, ff.name)
	f.mu.Unlock()
	if err != nil {
		if wb, ok := ff.File.(interface{ failWriteback() }); ok {
			wb.failWriteback()
		}
		return err
	}
	if err := ff.File.Sync(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.syncs++
	return nil
}

// WriteAt writes to the wrapped file as far as the armed faults allow.
func (ff *faultyFile) WriteAt(p []byte, off int64) (int, error) {
	allowed, err := ff.f.reserve(ff.name, len(p))
	if allowed == 0 && err != nil {
		return 0, err
	}
	n, werr := ff.File.WriteAt(p[:allowed], off)
	if werr != nil {
		return n, werr
	}
	return n, err
}

// reserve returns how many of the want bytes a write to name may write,
// taking them from the budget, and the error of the write if that is fewer
// than want. Reserved bytes stay spent even if the wrapped file then writes
// fewer.
func (f *Faulty) reserve(name string, want int) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fault(f.writeErr, name); err != nil {
		return 0, err
	}
	if f.fault(f.budgetErr, name) == nil {
		return want, nil
	}
	allowed := int(min(int64(want), f.budget))
	f.budget -= int64(allowed)
	if allowed < want {
		return allowed, f.budgetErr
	}
	return allowed, nil
}
