package vfs

import "syscall"

// Available returns the bytes that can still be written in dir's
// filesystem, and false if fsys cannot tell.
func Available(fsys FS, dir string) (int64, bool) {
	if s, ok := fsys.(spacer); ok {
		return s.available(dir)
	}
	return 0, false
}

// spacer is an FS that knows its free space.
type spacer interface {
	available(dir string) (int64, bool)
}

// available returns the space that unprivileged users may fill, from
// statfs. It leaves out the blocks reserved for root, which a process may
// fill only with CAP_SYS_RESOURCE, and disk quotas are not counted: it can
// be more, or less, than a write can use.
func (osFS) available(dir string) (int64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Frsize), true
}

// available returns the room left under the capacity, if one is set.
func (m *Mem) available(string) (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.room(), m.capacity > 0
}

// available asks the wrapped FS.
func (f *Faulty) available(dir string) (int64, bool) { return Available(f.fs, dir) }
