package vfs

import "os"

// OS is the real filesystem. Its errors are the os package's, so they name
// the file (*os.PathError) and match fs.ErrNotExist and ErrNoSpace.
var OS FS = osFS{}

// osFS implements FS with the os package.
type osFS struct{}

// osFile is an open *os.File with the Size method File needs.
type osFile struct{ *os.File }

// Create creates or truncates name with mode 0644, open for reading and
// writing.
func (osFS) Create(name string) (File, error) {
	return openFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC)
}

// Open opens name read-only.
func (osFS) Open(name string) (File, error) { return openFile(name, os.O_RDONLY) }

// OpenRW opens an existing name for reading and writing.
func (osFS) OpenRW(name string) (File, error) { return openFile(name, os.O_RDWR) }

// openFile opens name with flag. It returns a nil File, not a File holding
// a nil *os.File, when it fails.
func openFile(name string, flag int) (File, error) {
	f, err := os.OpenFile(name, flag, 0o644)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// Rename renames oldname to newname with os.Rename.
func (osFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

// Remove removes name with os.Remove.
func (osFS) Remove(name string) error { return os.Remove(name) }

// ReadDir returns the sorted names of every entry in dir: files,
// subdirectories and anything else.
func (osFS) ReadDir(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, err
}

// Mkdir creates dir with mode 0755.
func (osFS) Mkdir(dir string) error { return os.Mkdir(dir, 0o755) }

// SyncDir fsyncs dir itself, which makes the entries in it durable.
func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Size returns the file's size from Stat.
func (f osFile) Size() (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
