package snap_test

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"

	"github.com/flintkv/flint/internal/frame"
	"github.com/flintkv/flint/internal/seedtest"
	"github.com/flintkv/flint/internal/snap"
	"github.com/flintkv/flint/internal/vfs"
)

// sent writes a snapshot on a sender's filesystem and returns its meta,
// pairs and bytes as OpenFile streams them.
func sent(t *testing.T, rng *rand.Rand) (snap.Meta, []pair, []byte) {
	t.Helper()
	src := newMem(t)
	meta := snap.Meta{Index: 40, Term: 6, Conf: jointConf, Sections: randomSections(rng)}
	ps := randomPairs(rng, 500)
	name := mustWrite(t, src, src, meta, ps)
	rc, size, err := snap.OpenFile(src, dir, name)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil || int64(len(b)) != size || !bytes.Equal(b, readFile(t, src, name)) {
		t.Fatalf("OpenFile streamed %d bytes (%v), size %d; want the file's %d", len(b), err, size, len(readFile(t, src, name)))
	}
	return meta, ps, b
}

// TestInstall installs a snapshot streamed from another node: it is in
// place, whole and durable; a second Install of it replaces it.
func TestInstall(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedtest.Seed(t), 0))
	meta, ps, good := sent(t, rng)
	m := newMem(t)
	old := mustWrite(t, m, m, snap.Meta{Index: 10, Term: 2}, nil)
	want := "0000000000000028-0000000000000006.snap"
	for range 2 {
		name, err := snap.Install(m, dir, snap.Info{Name: want, Index: meta.Index, Term: meta.Term}, iotest.HalfReader(bytes.NewReader(good)))
		if err != nil || name != want {
			t.Fatalf("Install = %s, %v; want %s", name, err, want)
		}
		m.CrashWith(rng)
		if got := files(t, m); !slices.Equal(got, []string{old, want}) {
			t.Fatalf("after Install and a crash the directory holds %v", got)
		}
		got, gotPs, err := load(m, name)
		if err != nil {
			t.Fatal(err)
		}
		checkMeta(t, got, meta)
		checkPairs(t, gotPs, ps)
	}
}

// TestInstallRejects: a truncated stream, a damaged one, one of another
// snapshot, or one that cannot be received or written, installs nothing
// and leaves nothing behind.
func TestInstallRejects(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedtest.Seed(t), 0))
	meta, _, good := sent(t, rng)
	info := snap.Info{Index: meta.Index, Term: meta.Term}
	name := "0000000000000028-0000000000000006.snap"
	tmp := path.Join(dir, name+".tmp")
	// install installs body with info, and checks that it fails and leaves
	// the directory as it was.
	install := func(t *testing.T, m *vfs.Mem, fs vfs.FS, info snap.Info, body io.Reader) error {
		t.Helper()
		before := files(t, m)
		_, err := snap.Install(fs, dir, info, body)
		if err == nil {
			t.Fatal("Install succeeded")
		}
		if !strings.HasPrefix(err.Error(), "snap: installing ") {
			t.Fatalf("Install's error %q", err)
		}
		if got := files(t, m); !slices.Equal(got, before) {
			t.Fatalf("a failed Install left %v, the directory held %v", got, before)
		}
		return err
	}
	checkDamage := func(t *testing.T, err error, off int64, words ...string) {
		t.Helper()
		se := snapError(t, err)
		if se.File != tmp || se.Offset != off {
			t.Fatalf("error %q is for %s at %d, want %s at %d", err, se.File, se.Offset, tmp, off)
		}
		for _, w := range words {
			if !strings.Contains(se.Reason, w) {
				t.Fatalf("error %q does not mention %q", err, w)
			}
		}
	}
	fr := framesOf(t, good)

	t.Run("truncated", func(t *testing.T) {
		cuts := []int64{0, 1, 8, fr[1].off, fr[2].off + 5, int64(len(good)) - 8, int64(len(good)) - 1}
		for range 5 {
			cuts = append(cuts, rng.Int64N(int64(len(good))))
		}
		for _, cut := range cuts {
			err := install(t, newMem(t), newMem(t), info, bytes.NewReader(good[:cut]))
			want := int64(len(good))
			for _, f := range fr {
				if cut < f.off+f.size {
					want = f.off
					break
				}
			}
			checkDamage(t, err, want, "truncated")
		}
	})
	t.Run("a flipped byte", func(t *testing.T) {
		for range 10 {
			f := fr[rng.IntN(len(fr))]
			bad := slices.Clone(good)
			bad[f.off+rng.Int64N(frame.HeaderSize+1+int64(len(f.payload)))] ^= 1 << rng.IntN(8)
			checkDamage(t, install(t, newMem(t), newMem(t), info, bytes.NewReader(bad)), f.off)
		}
	})
	t.Run("data after the end", func(t *testing.T) {
		err := install(t, newMem(t), newMem(t), info, bytes.NewReader(append(slices.Clone(good), good[:64]...)))
		checkDamage(t, err, int64(len(good)), "data after the end record")
	})
	t.Run("another snapshot", func(t *testing.T) {
		for _, other := range []snap.Info{{Index: meta.Index + 1, Term: meta.Term}, {Index: meta.Index, Term: meta.Term + 1}} {
			m := newMem(t)
			err := install(t, m, m, other, bytes.NewReader(good))
			se := snapError(t, err)
			if se.Offset != 0 || !strings.Contains(se.Reason, "the header is of the snapshot at index 40, term 6, not of the one") {
				t.Fatalf("Install of the snapshot at 40, 6 as %+v: %v", other, err)
			}
		}
	})
	t.Run("a name that is not the snapshot's", func(t *testing.T) {
		m := newMem(t)
		err := install(t, m, m, snap.Info{Name: "x.snap", Index: meta.Index, Term: meta.Term}, bytes.NewReader(good))
		if !strings.Contains(err.Error(), "is named "+name) {
			t.Fatalf("Install named x.snap: %v", err)
		}
	})
	t.Run("the stream fails", func(t *testing.T) {
		m := newMem(t)
		err := install(t, m, m, info, io.MultiReader(bytes.NewReader(good[:1000]), iotest.ErrReader(syscall.ECONNRESET)))
		var se *snap.Error
		if !errors.Is(err, syscall.ECONNRESET) || errors.As(err, &se) {
			t.Fatalf("Install of a stream that fails: %v, want the stream's error", err)
		}
	})
	t.Run("disk full", func(t *testing.T) {
		m := newMem(t)
		m.SetCapacity(int64(len(good)) / 2)
		if err := install(t, m, m, info, bytes.NewReader(good)); !vfs.IsNoSpace(err) {
			t.Fatalf("Install on a full disk: %v", err)
		}
	})
	t.Run("sync fails", func(t *testing.T) {
		m := newMem(t)
		f := vfs.NewFaulty(m)
		f.FailSync(syscall.EIO)
		if err := install(t, m, f, info, bytes.NewReader(good)); !errors.Is(err, syscall.EIO) {
			t.Fatalf("Install with a failing fsync: %v", err)
		}
	})
	t.Run("directory sync fails", func(t *testing.T) {
		m := newMem(t)
		f := vfs.NewFaulty(m)
		f.FailSyncDir(syscall.EIO)
		if err := install(t, m, f, info, bytes.NewReader(good)); !errors.Is(err, syscall.EIO) {
			t.Fatalf("Install with a failing directory sync: %v", err)
		}
	})
}

// TestOpenFileAfterPrune: a snapshot being sent can be pruned; the stream
// still reads the whole file, which installs.
func TestOpenFileAfterPrune(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedtest.Seed(t), 0))
	src := newMem(t)
	ps := randomPairs(rng, 500)
	name := mustWrite(t, src, src, snap.Meta{Index: 5, Term: 1, Conf: voters(1)}, ps)
	rc, size, err := snap.OpenFile(src, dir, name)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	mustWrite(t, src, src, snap.Meta{Index: 6, Term: 1}, nil)
	if err := snap.Prune(src, dir, 1); err != nil {
		t.Fatal(err)
	}
	m := newMem(t)
	got, err := snap.Install(m, dir, snap.Info{Index: 5, Term: 1}, rc)
	if err != nil || got != name {
		t.Fatalf("Install of a pruned snapshot = %s, %v", got, err)
	}
	if b := readFile(t, m, name); int64(len(b)) != size {
		t.Fatalf("installed %d bytes of %d", len(b), size)
	}
	if _, got, err := load(m, name); err != nil {
		t.Fatal(err)
	} else {
		checkPairs(t, got, ps)
	}
	for _, bad := range []string{"../0000000000000005-0000000000000001.snap", "a.snap", name + ".tmp"} {
		if _, _, err := snap.OpenFile(src, dir, bad); err == nil || !strings.Contains(err.Error(), "not a snapshot name") {
			t.Fatalf("OpenFile(%q): %v", bad, err)
		}
	}
	if _, _, err := snap.OpenFile(src, dir, name); err == nil {
		t.Fatal("OpenFile of a pruned snapshot succeeded")
	}
}

// readFailing is an FS whose files fail reads that reach offset at.
type readFailing struct {
	vfs.FS
	at int64
}

func (f readFailing) Open(name string) (vfs.File, error) {
	file, err := f.FS.Open(name)
	return failingFile{file, f.at}, err
}

type failingFile struct {
	vfs.File
	at int64
}

func (f failingFile) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > f.at {
		return 0, syscall.EIO
	}
	return f.File.ReadAt(p, off)
}

// TestVerifyReadError: Verify of a file it cannot read fails with the
// read's error, which is not damage, wherever the read fails.
func TestVerifyReadError(t *testing.T) {
	m := newMem(t)
	name := mustWrite(t, m, m, snap.Meta{Index: 5, Term: 1, Sections: []snap.Section{{Name: "s", Data: []byte("x")}}}, randomPairs(rand.New(rand.NewPCG(1, 2)), 100))
	size := int64(len(readFile(t, m, name)))
	for _, at := range []int64{0, 20, size / 2, size - 8} { // size - 8: in the end frame, not its padding, which is not read
		_, err := snap.Verify(readFailing{m, at}, path.Join(dir, name))
		var se *snap.Error
		if !errors.Is(err, syscall.EIO) || errors.As(err, &se) || !strings.HasPrefix(err.Error(), "snap: reading ") {
			t.Fatalf("Verify failing at %d of %d: %v, want EIO", at, size, err)
		}
	}
	if _, err := snap.Verify(readFailing{m, size}, path.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
	// Past the end record, a read that fails is not "data after the end".
	writeFile(t, m, name, append(readFile(t, m, name), 1, 2, 3, 4, 5, 6, 7, 8))
	if _, err := snap.Verify(readFailing{m, size + 1}, path.Join(dir, name)); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Verify failing after the end record: %v, want EIO", err)
	}
	if _, err := snap.Verify(m, path.Join(dir, "missing.snap")); err == nil || !strings.HasPrefix(err.Error(), "snap: ") {
		t.Fatalf("Verify of a missing file: %v", err)
	}
}
