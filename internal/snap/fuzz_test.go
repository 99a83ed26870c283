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

// FuzzLoad loads arbitrary bytes as a snapshot file. Load must not panic,
// and must either fail with a *snap.Error or return a snapshot that writes
// back and loads the same.
func FuzzLoad(f *testing.F) {
	m := vfs.NewMem()
	if err := vfs.MkdirAll(m, dir); err != nil {
		f.Fatal(err)
	}
	ps := []pair{{"", nil}, {"a", []byte("1")}, {"key", bytes.Repeat([]byte("v"), 100)}}
	for i, meta := range []snap.Meta{{Index: 1, Term: 1}, {Index: 7, Term: 3, Voters: []uint64{1, 2, 3}}} {
		name, _, err := snap.Write(m, dir, meta, pairsOf(ps[:i+2]))
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
	f.Add(build(header("FLNTSNP1", 1, 5, 2, 1), pairsFrame("a", "1", "bb", "22"), endFrame(2, 6)))
	f.Add(build(header("FLNTSNP1", 1, 5, 2, 1), frame.Append(nil, 2, nil), endFrame(0, 0), make([]byte, 16)))
	f.Add([]byte{})

	f.Fuzz(func(t *testing.T, data []byte) {
		m := vfs.NewMem()
		if err := vfs.MkdirAll(m, dir); err != nil {
			t.Fatal(err)
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
