package wal_test

import (
	"errors"
	"fmt"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/frame"
	"github.com/flintkv/flint/internal/vfs"
	"github.com/flintkv/flint/internal/wal"
)

// FuzzSegment opens a log whose only segment holds arbitrary bytes. Open
// must not panic or hang, and must either fail with a *wal.Error or replay
// records; then the log must take a Save and open again with the same
// entries and the one saved.
func FuzzSegment(f *testing.F) {
	// A real segment, and pieces of it.
	m := vfs.NewMem()
	w, _ := mustOpen(f, m, wal.Options{}, 0)
	mustSave(f, w, entries(1, 3, 1), hardState(1, 1, 0))
	mustSave(f, w, nil, hardState(2, 1, 3))
	mustSave(f, w, entries(2, 4, 2), hardState(2, 1, 3))
	mustSave(f, w, []raftpb.Entry{{Index: 5, Term: 2, Type: raftpb.EntryConfChange}}, raftpb.HardState{})
	mustClose(f, w)
	seg := readFile(f, m, segName(1, 1))
	f.Add(seg)
	f.Add(seg[:len(seg)-5])
	f.Add(seg[:headerSize])
	f.Add(seg[:headerSize+3])
	f.Add(append(seg[:len(seg):len(seg)], make([]byte, 64)...))
	f.Add(append(seg[:len(seg):len(seg)], frame.Append(nil, 9, []byte("x"))...))
	f.Add([]byte{})

	f.Fuzz(func(t *testing.T, data []byte) {
		m := vfs.NewMem()
		if err := vfs.MkdirAll(m, dir); err != nil {
			t.Fatal(err)
		}
		name := segName(1, 1)
		writeFile(t, m, name, data)
		w, r, err := open(t, m, wal.Options{}, 0)
		if err != nil {
			var we *wal.Error
			if !errors.As(err, &we) {
				t.Fatalf("Open failed with %v (%T), not a *wal.Error", err, err)
			}
			return
		}
		got := r.entries()
		last := w.Metrics().LastIndex
		if len(got) > 0 && got[len(got)-1].Index != last {
			t.Fatalf("LastIndex %d, but the last entry replayed is %d", last, got[len(got)-1].Index)
		}
		// The log takes a Save, in the segment as Open left it, and opens
		// again with it.
		e := raftpb.Entry{Index: last + 1, Term: 9, Data: []byte("new")}
		mustSave(t, w, []raftpb.Entry{e}, hardState(9, 9, last))
		mustClose(t, w)
		m.Crash()
		w, r = mustOpen(t, m, wal.Options{}, 0)
		defer mustClose(t, w)
		checkEntries(t, "replay after a Save", r.entries(), append(got, e))
		if hs := r.hardState(); hs != hardState(9, 9, last) {
			t.Fatalf("hard state %v after a Save", hs)
		}
	})
}

// FuzzSharedSegment is FuzzSegment for a shared log: Open must fail with a
// *wal.Error or read the groups' logs; each group that opens from no
// snapshot must take a Save and read it back once the log is reopened.
func FuzzSharedSegment(f *testing.F) {
	m := vfs.NewMem()
	sh := openShared(f, m, wal.Options{})
	mustSaveShared(f, sh, []wal.Write{
		{Group: 1, Entries: entries(1, 3, 1), HardState: hardState(1, 1, 0)},
		{Group: 2, Entries: entries(1, 2, 1)},
	})
	mustSaveShared(f, sh, []wal.Write{{Group: 2, Entries: entries(2, 4, 2), HardState: hardState(2, 2, 1)}})
	mustSaveShared(f, sh, []wal.Write{{Group: 3, Restart: 9, Entries: entries(10, 10, 3)}})
	mustCloseShared(f, sh)
	seg := readFile(f, m, segName(1, 0))
	f.Add(seg)
	f.Add(seg[:len(seg)-5])
	f.Add(seg[:headerSize])
	f.Add(append(seg[:len(seg):len(seg)], frame.Append(nil, 9, []byte("x"))...))

	f.Fuzz(func(t *testing.T, data []byte) {
		m := vfs.NewMem()
		if err := vfs.MkdirAll(m, dir); err != nil {
			t.Fatal(err)
		}
		writeFile(t, m, segName(1, 0), data)
		sh, err := wal.OpenShared(m, dir, wal.Options{Logger: discard})
		if err != nil {
			var we *wal.Error
			if !errors.As(err, &we) {
				t.Fatalf("OpenShared failed with %v (%T), not a *wal.Error", err, err)
			}
			return
		}
		want := map[uint64]raftpb.Entry{}
		for g := uint64(1); g <= 3; g++ {
			grp, err := sh.Group(g, 0)
			if err != nil {
				continue
			}
			e := raftpb.Entry{Index: grp.LastIndex() + 1, Term: 9, Data: []byte("new")}
			mustSaveShared(t, sh, []wal.Write{{Group: g, Entries: []raftpb.Entry{e}}})
			want[g] = e
		}
		mustCloseShared(t, sh)
		m.Crash()
		sh = openShared(t, m, wal.Options{})
		defer mustCloseShared(t, sh)
		for g, e := range want {
			grp, err := sh.Group(g, 0)
			if err != nil {
				t.Fatalf("Group(%d, 0) after a Save: %v", g, err)
			}
			got, err := grp.Entries(e.Index, e.Index+1, 1<<20)
			if err != nil {
				t.Fatalf("group %d: Entries(%d): %v", g, e.Index, err)
			}
			checkEntries(t, fmt.Sprintf("group %d after a Save", g), got, []raftpb.Entry{e})
		}
	})
}
