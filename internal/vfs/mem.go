package vfs

import (
	"bytes"
	"errors"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"sort"
	"sync"
	"syscall"
)

// ErrStaleHandle is the error of every operation on a Mem file that was
// opened before the last Crash.
var ErrStaleHandle = errors.New("vfs: file handle from before a crash")

// Mem is an in-memory FS that can crash. It is safe for concurrent use.
//
// Every file has current content, which reads see, and durable content,
// which File.Sync sets to the current content. Every directory has current
// bindings of names to files and durable ones, which SyncDir sets to the
// current ones. Crash makes the durable state current again, as a power
// loss would. A directory made by Mkdir is durable once its parent is
// synced; a Crash before then removes it, with all it holds. Remove removes
// files only, and Rename renames files only.
//
// A file is an inode shared by its name and its open handles: a renamed
// file keeps its content and handles, and a removed file lives on for the
// handles open on it until the next Crash.
//
// CrashWith and CrashSectors also keep a prefix of the unsynced changes to
// directories, in the order they were made, as a journaling filesystem may
// have committed them; but never a change made after an unsynced Mkdir that
// the crash undoes. Two things a journaling filesystem would not do: a
// rename between directories of which SyncDir made one side durable keeps
// its other side only with the prefix, so a crash may leave the file with
// two names or none; and a file that only shrank since its last Sync
// (Truncate, or Create of an existing name) keeps its durable content. The
// changes are kept, with the files they bind, until the next crash or the
// SyncDir of their directory.
//
// The roots "." and "/" always exist; relative and absolute names are
// separate trees. Errors are *os.PathError (*os.LinkError for Rename)
// wrapping a syscall.Errno, so they name the file and match fs.ErrNotExist
// and ErrNoSpace as the os package's do.
type Mem struct {
	mu sync.Mutex
	// dirs holds every directory by cleaned name. The parent of every key
	// is a key, and no key is also a file name in its parent's bindings.
	dirs map[string]*memDir
	// epoch counts crashes. A handle is stale unless its epoch is this.
	epoch int
	// capacity bounds usage; 0 means no bound.
	capacity int64
	// journal holds, oldest first, the changes to directories' bindings
	// made since each directory was last synced, and the Mkdirs not yet
	// made durable by a SyncDir of their parents.
	journal []rebind
}

// rebind is one change that Create, Rename, Remove or Mkdir made, which a
// crash keeps whole or not at all. A rename between directories is two
// bindings; SyncDir of one of them makes its half durable and leaves the
// other in the journal.
type rebind []binding

// binding binds base in d to ino, or unbinds it if ino is nil. With an
// empty base, it marks the Mkdir of d.
type binding struct {
	d    *memDir
	base string
	ino  *inode
}

// memDir is a directory's bindings of base names to files.
type memDir struct {
	files   map[string]*inode // current bindings; never nil
	durable map[string]*inode // bindings that survive a crash; never nil
	synced  bool              // the directory's own entry in its parent survives a crash
}

// inode is a file's content.
type inode struct {
	data    []byte // current content
	durable []byte // content that survives a crash; never shares data's array
	// lost holds the ranges of data that a failed writeback left cached as
	// clean (see failWriteback), which Sync does not make durable.
	lost []span
}

// span is the range of bytes [lo, hi).
type span struct{ lo, hi int }

// memFile is an open handle on a Mem file. Its mutable fields are guarded
// by m.mu.
type memFile struct {
	m        *Mem
	ino      *inode
	name     string // as opened, for errors
	epoch    int    // m.epoch when opened
	writable bool
	off      int64 // where Read reads next
	closed   bool
}

// NewMem returns an empty Mem holding only its roots.
func NewMem() *Mem {
	m := &Mem{dirs: map[string]*memDir{".": newMemDir(), "/": newMemDir()}}
	m.dirs["."].synced, m.dirs["/"].synced = true, true
	return m
}

// newMemDir returns an empty directory.
func newMemDir() *memDir {
	return &memDir{files: map[string]*inode{}, durable: map[string]*inode{}}
}

// SetCapacity bounds the usage of the filesystem: the sum of the current
// sizes of the files bound to a name. Files that are removed but still open
// do not count. A WriteAt that would take usage past capacity writes the
// bytes that fit and fails with ErrNoSpace. Truncate never fails for lack of
// space, as files may be sparse, but its zeros count. Zero means no bound.
func (m *Mem) SetCapacity(capacity int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.capacity = capacity
}

// Crash reverts the filesystem to its durable state and makes every open
// handle stale. Data written since the file's last Sync is lost, and so are
// the changes to directories since their last SyncDir.
func (m *Mem) Crash() { m.crash(nil, false) }

// CrashWith is Crash for a power loss that tears writes: in a file whose
// content changed since its last Sync, of the bytes from the first changed
// one to the last changed one (or to the end, if the file grew), a prefix
// of a length chosen uniformly by r reaches the disk and is durable from
// then on. Of the unsynced changes to directories (files created, renamed
// and removed), the first k in the order made are kept, each whole, with
// k chosen uniformly by r; a file whose binding is kept keeps its durable
// content, which may be none. Other unsynced changes are lost as by Crash,
// which is CrashWith(nil). Files are visited in name order, so a seeded r
// gives the same result every time.
func (m *Mem) CrashWith(r *rand.Rand) { m.crash(r, false) }

// CrashSectors is CrashWith for a disk that writes sectors in any order:
// of the changed bytes, those in each 512-byte sector of the file reach
// the disk, or not, with even odds chosen by r. Bytes of a sector kept
// past the file's durable end leave zeros before them where sectors were
// lost.
func (m *Mem) CrashSectors(r *rand.Rand) { m.crash(r, true) }

// SectorSize is the unit in which CrashSectors tears writes.
const SectorSize = 512

// crash reverts the filesystem, tearing writes as CrashWith (r, !sectors)
// or CrashSectors (r, sectors) say.
func (m *Mem) crash(r *rand.Rand, sectors bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.epoch++
	for name := range m.dirs {
		if !m.survives(name) {
			delete(m.dirs, name)
		}
	}
	m.replayJournal(r)
	seen := map[*inode]bool{}
	for _, name := range slices.Sorted(maps.Keys(m.dirs)) {
		d := m.dirs[name]
		for _, base := range slices.Sorted(maps.Keys(d.durable)) {
			if ino := d.durable[base]; !seen[ino] {
				seen[ino] = true
				ino.revert(r, sectors)
			}
		}
		// A file durably bound in two directories, because it was renamed
		// and only one side synced, now has two names, like a hard link.
		d.files = maps.Clone(d.durable)
	}
}

// replayJournal makes durable the oldest unsynced changes to directories
// that r chooses (none if r is nil), up to the first that involves a
// directory the crash removed, and empties the journal. m.mu must be held.
func (m *Mem) replayJournal(r *rand.Rand) {
	defer func() { m.journal = nil }()
	if r == nil || len(m.journal) == 0 {
		return
	}
	alive := map[*memDir]bool{}
	for _, d := range m.dirs {
		alive[d] = true
	}
	for _, op := range m.journal[:r.IntN(len(m.journal)+1)] {
		if slices.ContainsFunc(op, func(b binding) bool { return !alive[b.d] }) {
			return // its Mkdir was lost, and so was all that came after
		}
		for _, b := range op {
			switch {
			case b.base == "": // a Mkdir, durable already
			case b.ino == nil:
				delete(b.d.durable, b.base)
			default:
				b.d.durable[b.base] = b.ino
			}
		}
	}
}

// record adds op to the journal. m.mu must be held.
func (m *Mem) record(op ...binding) { m.journal = append(m.journal, op) }

// forget drops from the journal what drop matches, which is durable now.
// m.mu must be held.
func (m *Mem) forget(drop func(binding) bool) {
	kept := m.journal[:0]
	for _, op := range m.journal {
		op = slices.DeleteFunc(op, drop)
		if len(op) > 0 {
			kept = append(kept, op)
		}
	}
	clear(m.journal[len(kept):])
	m.journal = kept
}

// survives reports whether the directory name and every directory above it
// are synced into their parents, so that a crash keeps it. m.mu must be
// held.
func (m *Mem) survives(name string) bool {
	for ; ; name = path.Dir(name) {
		if d := m.dirs[name]; d == nil || !d.synced {
			return false
		}
		if path.Dir(name) == name {
			return true
		}
	}
}

// revert makes the durable content current, keeping the changed bytes
// that r chooses, if r is not nil: a prefix, or whole sectors if sectors
// (see CrashWith and CrashSectors). The kept bytes are on the disk now, so
// they become durable too, but for those of a failed writeback, which no
// writeback writes.
func (ino *inode) revert(r *rand.Rand, sectors bool) {
	var old []byte // what the disk held, if no writeback may write some bytes
	if len(ino.lost) > 0 {
		old = bytes.Clone(ino.durable)
	}
	from, to := ino.changed()
	switch {
	case r == nil || to <= from:
	case sectors:
		for lo := from; lo < to; {
			hi := min(to, (lo/SectorSize+1)*SectorSize)
			if r.IntN(2) == 0 {
				ino.keep(lo, hi)
			}
			lo = hi
		}
	default:
		ino.keep(from, from+r.IntN(to-from+1))
	}
	ino.restore(ino.durable, old)
	ino.data = bytes.Clone(ino.durable)
	ino.lost = nil
}

// keep makes the current bytes in [lo, hi) durable, with zeros before them
// where the durable content ends short of lo.
func (ino *inode) keep(lo, hi int) {
	if n := hi - len(ino.durable); n > 0 {
		ino.durable = append(ino.durable, make([]byte, n)...)
	}
	copy(ino.durable[lo:hi], ino.data[lo:hi])
}

// changed returns the range of the current content that differs from the
// durable content, from its first changed byte to its last, or to its end
// if it is longer. A file that only shrank has no such range.
func (ino *inode) changed() (from, to int) {
	common := min(len(ino.data), len(ino.durable))
	for from = 0; from < common && ino.data[from] == ino.durable[from]; from++ {
	}
	if len(ino.data) > len(ino.durable) {
		return from, len(ino.data)
	}
	for to = common; to > from && ino.data[to-1] == ino.durable[to-1]; to-- {
	}
	return from, to
}

// ReadFile returns a copy of the current content of name.
func (m *Mem) ReadFile(name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.file("open", name)
	if err != nil {
		return nil, err
	}
	return bytes.Clone(d.files[base].data), nil
}

// WriteFile makes data the current and durable content of name, and binds
// name durably, without regard to capacity. It is for tests that damage
// files. An existing file keeps its identity, so open handles see data.
func (m *Mem) WriteFile(name string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.parent("open", name)
	if err != nil {
		return err
	}
	ino := d.files[base]
	if ino == nil {
		ino = &inode{}
		d.files[base] = ino
	}
	d.durable[base] = ino
	m.forget(func(b binding) bool { return b.d == d && b.base == base })
	ino.data, ino.durable = bytes.Clone(data), bytes.Clone(data)
	return nil
}

// locate returns the directory that holds name, and name's base name. It
// fails if that directory does not exist or name is a directory. m.mu must
// be held.
func (m *Mem) locate(name string) (*memDir, string, syscall.Errno) {
	clean := path.Clean(name)
	if m.dirs[clean] != nil {
		return nil, "", syscall.EISDIR
	}
	d := m.dirs[path.Dir(clean)]
	if d == nil {
		return nil, "", syscall.ENOENT
	}
	return d, path.Base(clean), 0
}

// parent is locate with the error of operation op on name. m.mu must be
// held.
func (m *Mem) parent(op, name string) (*memDir, string, error) {
	d, base, errno := m.locate(name)
	if errno != 0 {
		return nil, "", &os.PathError{Op: op, Path: name, Err: errno}
	}
	return d, base, nil
}

// file is parent for a name that must be bound to a file. m.mu must be
// held.
func (m *Mem) file(op, name string) (*memDir, string, error) {
	d, base, err := m.parent(op, name)
	if err == nil && d.files[base] == nil {
		err = &os.PathError{Op: op, Path: name, Err: syscall.ENOENT}
	}
	return d, base, err
}

// Create creates name, or truncates it if it exists, open for reading and
// writing.
func (m *Mem) Create(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.parent("open", name)
	if err != nil {
		return nil, err
	}
	ino := d.files[base]
	if ino == nil {
		ino = &inode{}
		d.files[base] = ino
		m.record(binding{d, base, ino})
	}
	ino.data = ino.data[:0]
	return m.handle(ino, name, true), nil
}

// Open opens an existing file for reading.
func (m *Mem) Open(name string) (File, error) { return m.open(name, false) }

// OpenRW opens an existing file for reading and writing.
func (m *Mem) OpenRW(name string) (File, error) { return m.open(name, true) }

// open opens an existing file.
func (m *Mem) open(name string, writable bool) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.file("open", name)
	if err != nil {
		return nil, err
	}
	return m.handle(d.files[base], name, writable), nil
}

// handle returns a new handle on ino. m.mu must be held.
func (m *Mem) handle(ino *inode, name string, writable bool) *memFile {
	return &memFile{m: m, ino: ino, name: name, epoch: m.epoch, writable: writable}
}

// Rename binds the file at oldname to newname, replacing any file there.
func (m *Mem) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	od, obase, errno := m.locate(oldname)
	if errno == 0 && od.files[obase] == nil {
		errno = syscall.ENOENT
	}
	var nd *memDir
	var nbase string
	if errno == 0 {
		nd, nbase, errno = m.locate(newname)
	}
	if errno != 0 {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: errno}
	}
	ino := od.files[obase]
	delete(od.files, obase)
	nd.files[nbase] = ino
	m.record(binding{od, obase, nil}, binding{nd, nbase, ino})
	return nil
}

// Remove unbinds the file name. Handles open on it keep working.
func (m *Mem) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.file("remove", name)
	if err != nil {
		return err
	}
	delete(d.files, base)
	m.record(binding{d, base, nil})
	return nil
}

// ReadDir returns the sorted names of the files and subdirectories in dir.
func (m *Mem) ReadDir(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	clean := path.Clean(dir)
	d := m.dirs[clean]
	switch {
	case d == nil && m.isFile(clean):
		return nil, &os.PathError{Op: "readdirent", Path: dir, Err: syscall.ENOTDIR}
	case d == nil:
		return nil, &os.PathError{Op: "open", Path: dir, Err: syscall.ENOENT}
	}
	names := slices.Collect(maps.Keys(d.files))
	for sub := range m.dirs {
		if sub != clean && path.Dir(sub) == clean {
			names = append(names, path.Base(sub))
		}
	}
	sort.Strings(names)
	return names, nil
}

// Mkdir creates the directory dir, whose parent must exist. It is durable
// once SyncDir on its parent returns nil.
func (m *Mem) Mkdir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	clean := path.Clean(dir)
	if m.dirs[clean] != nil {
		return &os.PathError{Op: "mkdir", Path: dir, Err: syscall.EEXIST}
	}
	d, base, err := m.parent("mkdir", clean)
	switch {
	case err != nil && m.isFile(path.Dir(clean)):
		return &os.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
	case err != nil:
		return err
	case d.files[base] != nil:
		return &os.PathError{Op: "mkdir", Path: dir, Err: syscall.EEXIST}
	}
	m.dirs[clean] = newMemDir()
	m.record(binding{d: m.dirs[clean]})
	return nil
}

// isFile reports whether name is bound to a file. m.mu must be held.
func (m *Mem) isFile(name string) bool {
	d, base, errno := m.locate(name)
	return errno == 0 && d.files[base] != nil
}

// SyncDir makes the current bindings of dir durable.
func (m *Mem) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	clean := path.Clean(dir)
	d := m.dirs[clean]
	if d == nil {
		return &os.PathError{Op: "open", Path: dir, Err: syscall.ENOENT}
	}
	d.durable = maps.Clone(d.files)
	subs := map[*memDir]bool{}
	for sub, sd := range m.dirs {
		if sub != clean && path.Dir(sub) == clean {
			sd.synced = true
			subs[sd] = true
		}
	}
	m.forget(func(b binding) bool { return b.d == d && b.base != "" || subs[b.d] && b.base == "" })
	return nil
}

// usage returns the sum of the current sizes of the files bound to a name,
// counting a file with several names once. m.mu must be held.
func (m *Mem) usage() int64 {
	seen := map[*inode]bool{}
	var n int64
	for _, d := range m.dirs {
		for _, ino := range d.files {
			if !seen[ino] {
				seen[ino] = true
				n += int64(len(ino.data))
			}
		}
	}
	return n
}

// room returns by how many bytes usage may grow. m.mu must be held.
func (m *Mem) room() int64 {
	if m.capacity == 0 {
		return math.MaxInt64
	}
	return max(0, m.capacity-m.usage())
}

// check returns the error of an operation op on f, or nil if f is usable.
// f.m.mu must be held.
func (f *memFile) check(op string) error {
	switch {
	case f.epoch != f.m.epoch:
		return &os.PathError{Op: op, Path: f.name, Err: ErrStaleHandle}
	case f.closed:
		return &os.PathError{Op: op, Path: f.name, Err: os.ErrClosed}
	}
	return nil
}

// Read reads from where the last Read stopped.
func (f *memFile) Read(p []byte) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.check("read"); err != nil {
		return 0, err
	}
	n, err := f.readAt(p, f.off)
	f.off += int64(n)
	if n > 0 && err == io.EOF {
		err = nil // io.Reader reports EOF once nothing is left
	}
	return n, err
}

// ReadAt reads len(p) bytes at off, or fails with io.EOF after the bytes
// before the end of the file.
func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.check("read"); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &os.PathError{Op: "readat", Path: f.name, Err: syscall.EINVAL}
	}
	return f.readAt(p, off)
}

// readAt copies the content at off into p. f.m.mu must be held.
func (f *memFile) readAt(p []byte, off int64) (int, error) {
	if off >= int64(len(f.ino.data)) {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := copy(p, f.ino.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// WriteAt writes p at off, filling any gap past the end with zeros. If the
// capacity is reached it writes the bytes that fit and fails with
// ErrNoSpace.
func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.checkWritable("write"); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &os.PathError{Op: "writeat", Path: f.name, Err: syscall.EINVAL}
	}
	// The write may end no further than the room past the current end.
	limit := int64(len(f.ino.data)) + min(f.m.room(), math.MaxInt64-int64(len(f.ino.data)))
	n := int(max(0, min(int64(len(p)), limit-off)))
	if n > 0 {
		f.ino.writeAt(p[:n], off)
	}
	if n < len(p) {
		return n, &os.PathError{Op: "write", Path: f.name, Err: syscall.ENOSPC}
	}
	return n, nil
}

// checkWritable returns the error of an operation op that changes f, or
// nil if f is usable and open for writing. f.m.mu must be held.
func (f *memFile) checkWritable(op string) error {
	if err := f.check(op); err != nil {
		return err
	}
	if !f.writable {
		return &os.PathError{Op: op, Path: f.name, Err: syscall.EBADF}
	}
	return nil
}

// writeAt writes p at off, filling any gap past the end with zeros.
func (ino *inode) writeAt(p []byte, off int64) {
	ino.resize(max(int64(len(ino.data)), off+int64(len(p))))
	copy(ino.data[off:], p)
	ino.unlose(int(off), int(off)+len(p))
}

// unlose takes [lo, hi) out of the lost ranges: those bytes are dirty
// again, or gone.
func (ino *inode) unlose(lo, hi int) {
	var kept []span
	for _, l := range ino.lost {
		if l.lo < lo {
			kept = append(kept, span{l.lo, min(l.hi, lo)})
		}
		if l.hi > hi {
			kept = append(kept, span{max(l.lo, hi), l.hi})
		}
	}
	ino.lost = kept
}

// resize makes the content size bytes long, cutting it or adding zeros.
func (ino *inode) resize(size int64) {
	if grow := size - int64(len(ino.data)); grow > 0 {
		ino.data = append(ino.data, make([]byte, grow)...)
	} else {
		ino.data = ino.data[:size]
		ino.unlose(int(size), math.MaxInt)
	}
}

// Truncate changes the size of the file, cutting it or adding zeros.
func (f *memFile) Truncate(size int64) error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.checkWritable("truncate"); err != nil {
		return err
	}
	if size < 0 {
		return &os.PathError{Op: "truncate", Path: f.name, Err: syscall.EINVAL}
	}
	f.ino.resize(size)
	return nil
}

// Sync makes the file's current content durable. It works on read-only
// handles too, as fsync does.
func (f *memFile) Sync() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.check("sync"); err != nil {
		return err
	}
	old := f.ino.durable
	f.ino.durable = bytes.Clone(f.ino.data)
	f.ino.restore(f.ino.durable, old)
	return nil
}

// restore copies into dst, in the lost ranges, the bytes of src, or zeros
// past its end.
func (ino *inode) restore(dst, src []byte) {
	for _, l := range ino.lost {
		for i := l.lo; i < min(l.hi, len(dst)); i++ {
			dst[i] = 0
			if i < len(src) {
				dst[i] = src[i]
			}
		}
	}
}

// failWriteback does to f what a failed writeback does to a file on Linux:
// the kernel marks the pages it could not write clean, so that reads go on
// returning the data they hold while no later fsync writes it, until the
// pages are evicted (DropCache) or the machine loses power. The Faulty FS
// calls it when it fails a Sync.
func (f *memFile) failWriteback() {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.check("sync") != nil {
		return
	}
	if from, to := f.ino.changed(); to > from {
		f.ino.lost = append(f.ino.lost, span{from, to})
	}
}

// DropCache makes reads of the bytes that a failed writeback left in the
// cache (see failWriteback) return what the disk holds, the file's durable
// content or zeros past its end. Unlike Linux, it drops them even if the
// file is mapped (see Map), as by an earlier Open in the same process.
func (f *memFile) DropCache() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.check("fadvise"); err != nil {
		return err
	}
	f.ino.restore(f.ino.data, f.ino.durable)
	f.ino.lost = nil
	return nil
}

// Size returns the current size of the file.
func (f *memFile) Size() (int64, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.check("stat"); err != nil {
		return 0, err
	}
	return int64(len(f.ino.data)), nil
}

// Close closes the handle. Later operations on it fail with os.ErrClosed.
func (f *memFile) Close() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.check("close"); err != nil {
		return err
	}
	f.closed = true
	return nil
}
