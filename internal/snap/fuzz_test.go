package snap_test

import (
	"bytes"
	"errors"
	"path"
	"testing"

	"github.com/flintkv/flint/internal/frame"
	"github.com/flintkv/flint/internal/snap"
	"github.com/flintkv/flint/internal/vfs"
)

// FuzzLoad loads arbitrary bytes as a snapshot file, of either version.
// Load must not panic, Verify must agree with it (see load), and Install
// of the bytes must too; a snapshot that loads must write back and load
// the same.
func FuzzLoad(f *testing.F) {
	m := vfs.NewMem()
	if err := vfs.MkdirAll(m, dir); err != nil {
		f.Fatal(err)
	}
	ps := []pair{{"", nil}, {"a", []byte("1")}, {"key", bytes.Repeat([]byte("v"), 100)}}
	for i, meta := range []snap.Meta{
		{Index: 1, Term: 1},
		{Index: 7, Term: 3, Conf: voters(1, 2, 3)},
		{Index: 9, Term: 4, Conf: jointConf, Sections: []snap.Section{{Name: "members", Data: []byte("1=a:1,2=b:2")}, {Name: "sessions"}}},
	} {
		name, _, err := snap.Write(m, dir, meta, pairsOf(ps[:min(i+2, len(ps))]))
		if err != nil {
			f.Fatal(err)
		}
		b, err := m.ReadFile(path.Join(dir, name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)-8])
	}
	v1 := header("FLNTSNP1", 1, 5, 2, 1)
	f.Add(build(v1, pairsFrame("a", "1", "bb", "22"), endFrame(2, 6)))
	f.Add(build(v1, frame.Append(nil, 2, nil), endFrame(0, 0), make([]byte, 16)))
	hdr := header2(withSections(2)...)
	f.Add(build(hdr, sectionFrame("members", 5, "1=a:1"), sectionFrame("sessions", 6, "abc"), sectionData("def"), pairsFrame("a", "1"), endFrame(1, 2)))
	f.Add(build(hdr, sectionFrame("members", 5, "1=a"), sectionData("x"), sectionData("y"), sectionFrame("s", 0, ""), endFrame(0, 0)))
	f.Add([]byte{})

	f.Fuzz(func(t *testing.T, data []byte) {
		m := vfs.NewMem()
		for _, d := range []string{dir, "in"} {
			if err := vfs.MkdirAll(m, d); err != nil {
				t.Fatal(err)
			}
		}
		name := "0000000000000001-0000000000000001.snap"
		if err := m.WriteFile(path.Join(dir, name), data); err != nil {
			t.Fatal(err)
		}
		meta, got, err := load(m, name)
		if err != nil {
			var se *snap.Error
			if !errors.As(err, &se) {
				t.Fatalf("Load failed with %v (%T), not a *snap.Error", err, err)
			}
		}
		// Install takes the bytes if and only if Load does.
		info := snap.Info{Index: meta.Index, Term: meta.Term}
		if _, ierr := snap.Install(m, "in", info, bytes.NewReader(data)); (ierr == nil) != (err == nil) {
			t.Fatalf("Load: %v; Install: %v", err, ierr)
		}
		if err != nil {
			return
		}
		// What loaded writes back, and loads the same.
		name2, _, err := snap.Write(m, dir, meta, pairsOf(got))
		if err != nil {
			t.Fatal(err)
		}
		meta2, got2, err := load(m, name2)
		if err != nil {
			t.Fatalf("a snapshot written from a loaded one does not load: %v", err)
		}
		checkMeta(t, meta2, meta)
		checkPairs(t, got2, got)
	})
}
