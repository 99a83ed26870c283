package vfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestOS(t *testing.T) {
	testFS(t, OS, t.TempDir())
}

func TestOSErrorsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	_, err := OS.Open(missing)
	var pe *os.PathError
	if !errors.As(err, &pe) || pe.Path != missing || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open(missing) = %v, want *os.PathError naming %s matching fs.ErrNotExist", err, missing)
	}
	if err := OS.SyncDir(missing); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("SyncDir(missing) = %v", err)
	}
}

// testFS checks the behaviour every FS shares, in the existing empty
// directory dir of fsys.
func testFS(t *testing.T, fsys FS, dir string) {
	t.Helper()
	name := func(base string) string { return dir + "/" + base }
	run := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	f, err := fsys.Create(name("a"))
	run("Create", err)
	_, err = f.WriteAt([]byte("hello"), 0)
	run("WriteAt", err)
	_, err = f.WriteAt([]byte("!"), 7) // leaves a gap of zeros
	run("WriteAt past the end", err)
	run("Sync", f.Sync())
	checkSize(t, f, 8)
	checkReads(t, f, "hello\x00\x00!")
	run("DropCache", f.DropCache())
	checkReads(t, f, "hello\x00\x00!")
	run("Truncate", f.Truncate(4))
	checkSize(t, f, 4)
	run("Truncate up", f.Truncate(6))
	checkReads(t, f, "hell\x00\x00")
	run("Close", f.Close())

	run("MkdirAll", MkdirAll(fsys, name("sub/deeper")))
	run("MkdirAll again", MkdirAll(fsys, name("sub/deeper")))
	for _, over := range []string{"a", "a/below"} { // a is a file
		if err := MkdirAll(fsys, name(over)); !errors.Is(err, syscall.ENOTDIR) {
			t.Fatalf("MkdirAll(%s) over a file: %v, want ENOTDIR", over, err)
		}
	}
	f, err = fsys.Create(name("b"))
	run("Create b", err)
	run("Close b", f.Close())
	run("Rename a over b", fsys.Rename(name("a"), name("b")))
	run("SyncDir", fsys.SyncDir(dir))
	names, err := fsys.ReadDir(dir)
	run("ReadDir", err)
	if want := []string{"b", "sub"}; !slices.Equal(names, want) {
		t.Fatalf("ReadDir = %q, want %q", names, want)
	}

	f, err = fsys.Open(name("b"))
	run("Open b", err)
	checkReads(t, f, "hell\x00\x00")
	// ReadAt did not move Read's offset from the start.
	if got, err := io.ReadAll(f); string(got) != "hell\x00\x00" || err != nil {
		t.Fatalf("ReadAll = %q, %v", got, err)
	}
	if n, err := f.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("Read at the end = %d, %v; want 0, EOF", n, err)
	}
	if _, err := f.WriteAt([]byte("x"), 0); err == nil {
		t.Fatal("WriteAt on a read-only file succeeded")
	}
	run("Close read-only", f.Close())
	f, err = fsys.OpenRW(name("b"))
	run("OpenRW b", err)
	_, err = f.WriteAt([]byte("J"), 0)
	run("WriteAt on OpenRW", err)
	checkReads(t, f, "Jell\x00\x00")
	run("Close", f.Close())

	run("Remove", fsys.Remove(name("b")))
	for _, err := range []error{
		fsys.Remove(name("b")),
		fsys.Rename(name("b"), name("c")),
		first(fsys.Open(name("b"))),
		first(fsys.OpenRW(name("b"))),
		first(fsys.Create(name("nodir/c"))),
		first(fsys.ReadDir(name("nodir"))),
	} {
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("operation on a missing file: %v, want fs.ErrNotExist", err)
		}
	}
}

// first returns the error of an open or a listing.
func first[T any](_ T, err error) error { return err }

// checkSize checks that f is size bytes long.
func checkSize(t *testing.T, f File, size int64) {
	t.Helper()
	if got, err := f.Size(); got != size || err != nil {
		t.Fatalf("Size() = %d, %v; want %d", got, err, size)
	}
}

// checkReads checks with ReadAt that f holds want.
func checkReads(t *testing.T, f File, want string) {
	t.Helper()
	buf := make([]byte, len(want)+1)
	n, err := f.ReadAt(buf, 0)
	if string(buf[:n]) != want || err != io.EOF {
		t.Fatalf("ReadAt past the end = %q, %v; want %q, EOF", buf[:n], err, want)
	}
	if n, err := f.ReadAt(buf[:1], 1); n != 1 || err != nil || buf[0] != want[1] {
		t.Fatalf("ReadAt(1 byte at 1) = %d, %v, %q", n, err, buf[:1])
	}
	got, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<20))
	if string(got) != want || err != nil {
		t.Fatalf("read with ReadAt: %q, %v; want %q", got, err, want)
	}
	if sz, _ := f.Size(); sz != int64(len(want)) {
		t.Fatalf("Size() = %d, want %d", sz, len(want))
	}
}

// TestMap maps files of the OS filesystem and of Mem: the bytes returned are
// the file's, and stay as they were when the file grows or is removed.
func TestMap(t *testing.T) {
	dir := t.TempDir()
	for _, fsys := range []FS{OS, NewMem()} {
		name := dir + "/f"
		if err := MkdirAll(fsys, dir); err != nil {
			t.Fatal(err)
		}
		f, err := fsys.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if b, err := Map(f); err != nil || b != nil {
			t.Fatalf("%T: Map of an empty file = %q, %v", fsys, b, err)
		}
		if _, err := f.WriteAt([]byte("mapped"), 0); err != nil {
			t.Fatal(err)
		}
		b, err := Map(f)
		if err != nil || string(b) != "mapped" {
			t.Fatalf("%T: Map = %q, %v", fsys, b, err)
		}
		if _, err := f.WriteAt([]byte(" and appended"), 6); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if err := fsys.Remove(name); err != nil {
			t.Fatal(err)
		}
		if string(b) != "mapped" {
			t.Fatalf("%T: mapped bytes became %q", fsys, b)
		}
	}
}

// syncLog is an FS that records the directories SyncDir syncs.
type syncLog struct {
	FS
	synced []string
}

func (s *syncLog) SyncDir(dir string) error {
	s.synced = append(s.synced, dir)
	return s.FS.SyncDir(dir)
}

// TestMkdirAllDotDot checks that MkdirAll syncs the real parent of each
// directory it makes on a path that climbs out of the working directory,
// and nothing for the ".." it climbs through, which exists.
func TestMkdirAllDotDot(t *testing.T) {
	cwd := filepath.Join(t.TempDir(), "cwd")
	if err := os.Mkdir(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(cwd)
	fsys := &syncLog{FS: OS}
	if err := MkdirAll(fsys, "../x/y"); err != nil {
		t.Fatal(err)
	}
	if want := []string{"..", "../x"}; !slices.Equal(fsys.synced, want) {
		t.Fatalf("synced %q, want %q", fsys.synced, want)
	}
	if _, err := os.Stat(filepath.Join(cwd, "../x/y")); err != nil {
		t.Fatal(err)
	}
	// Taken as cleaned: "a" need not exist.
	fsys.synced = nil
	if err := MkdirAll(fsys, "a/../../z"); err != nil {
		t.Fatal(err)
	}
	if want := []string{".."}; !slices.Equal(fsys.synced, want) {
		t.Fatalf("synced %q, want %q", fsys.synced, want)
	}
}

// TestSyncHeld checks SyncHeld on a real file with one processor and with
// two: it keeps the processor (a raw system call) only with two; it
// succeeds on a file, and fails, naming the file, where fdatasync does (a
// pipe, a closed file); and on other filesystems' files it is their Sync,
// Faulty's faults included.
func TestSyncHeld(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	dir := t.TempDir()
	f, err := OS.Create(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for _, procs := range []int{1, 2} {
		runtime.GOMAXPROCS(procs)
		if _, held := holds(f); held != (procs > 1) {
			t.Errorf("GOMAXPROCS %d: SyncHeld keeps the processor: %v", procs, held)
		}
		if _, err := f.WriteAt([]byte("hello"), 0); err != nil {
			t.Fatal(err)
		}
		if err := SyncHeld(f); err != nil {
			t.Fatalf("GOMAXPROCS %d: SyncHeld(file) = %v", procs, err)
		}
		err := SyncHeld(osFile{r})
		var pe *os.PathError
		if !errors.As(err, &pe) || pe.Op != "fdatasync" || pe.Path != r.Name() || !errors.Is(err, syscall.EINVAL) {
			t.Fatalf("GOMAXPROCS %d: SyncHeld(pipe) = %v, want fdatasync %s: EINVAL", procs, err, r.Name())
		}
	}
	closed, err := OS.Create(filepath.Join(dir, "closed"))
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	if err := SyncHeld(closed); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("SyncHeld(closed file) = %v, want an error", err)
	}

	faulty := NewFaulty(OS)
	ff, err := faulty.Create(filepath.Join(dir, "b"))
	if err != nil {
		t.Fatal(err)
	}
	defer ff.Close()
	if _, held := holds(ff); held {
		t.Error("SyncHeld keeps the processor for a Faulty file, which would skip its faults")
	}
	faulty.FailSync(syscall.EIO)
	if err := SyncHeld(ff); !errors.Is(err, syscall.EIO) {
		t.Fatalf("SyncHeld(faulty file) = %v, want EIO", err)
	}
}
