package wal_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/vfs"
	"github.com/flintkv/flint/internal/wal"
)

// These tests check Restart, which a member that installs its leader's
// snapshot calls: the entries it held, even later ones than the snapshot,
// stop being part of the log, across a crash and a reopening.

// restarted writes entries 1 to 30 (the last ten of a leader that lost),
// restarts the log after 20, and writes 21 to 25 of the new leader.
func restarted(t *testing.T, fs vfs.FS) *wal.WAL {
	w, _ := mustOpen(t, fs, wal.Options{SegmentSize: 1 << 10}, 0)
	if err := w.Save(entries(1, 30, 1), raftpb.HardState{Term: 1, Commit: 5}); err != nil {
		t.Fatal(err)
	}
	if err := w.Restart(20, raftpb.HardState{Term: 3, Vote: 2, Commit: 20}); err != nil {
		t.Fatal(err)
	}
	if got := w.LastIndex(); got != 20 {
		t.Fatalf("LastIndex after Restart(20) = %d", got)
	}
	if err := w.Save(entries(21, 25, 3), raftpb.HardState{}); err != nil {
		t.Fatal(err)
	}
	return w
}

func TestRestart(t *testing.T) {
	mem := vfs.NewMem()
	w := restarted(t, mem)
	if ents, err := w.Entries(21, 26, 1<<30); err != nil || len(ents) != 5 || ents[0].Term != 3 {
		t.Fatalf("Entries(21, 26) = %v (%v)", ents, err)
	}
	if _, err := w.Entries(20, 21, 1<<30); !errors.Is(err, wal.ErrReleased) {
		t.Fatalf("Entries(20, 21) after Restart(20) = %v, want ErrReleased", err)
	}
	names, _ := mem.ReadDir(dir)
	if n := len(slices.DeleteFunc(names, func(n string) bool { return !strings.HasSuffix(n, ".wal") })); n != 1 {
		t.Fatalf("%d segments after Restart, want the new one alone: %v", n, names)
	}
	mustClose(t, w)
	mem.Crash() // Restart and Save made their writes durable
	w, rec := mustOpen(t, mem, wal.Options{}, 20)
	defer mustClose(t, w)
	if got, want := rec.log(), entries(21, 25, 3); !slices.EqualFunc(got, want, func(a, b raftpb.Entry) bool { return recEqual(entryRec(a), entryRec(b)) }) {
		t.Fatalf("log after reopening = %v, want %v", got, want)
	}
	if hs := rec.hardState(); hs.Term != 3 || hs.Vote != 2 {
		t.Fatalf("hard state after reopening = %+v", hs)
	}
}

// noRemove is a filesystem whose log segments cannot be deleted, as if a
// crash came right after Restart's restart record was durable.
type noRemove struct{ vfs.FS }

func (f noRemove) Remove(name string) error {
	if strings.HasSuffix(name, ".wal") {
		return errors.New("injected: no remove")
	}
	return f.FS.Remove(name)
}

// TestRestartLeftSegments reopens a log whose Restart could not delete the
// segments before it: Open drops them, and their entries after the
// restart's index do not come back.
func TestRestartLeftSegments(t *testing.T) {
	mem := vfs.NewMem()
	w, _ := mustOpen(t, mem, wal.Options{SegmentSize: 1 << 10}, 0)
	if err := w.Save(entries(1, 30, 1), raftpb.HardState{Term: 1, Commit: 5}); err != nil {
		t.Fatal(err)
	}
	mustClose(t, w)
	w, _ = mustOpen(t, noRemove{mem}, wal.Options{SegmentSize: 1 << 10}, 0)
	if err := w.Restart(20, raftpb.HardState{Term: 3, Commit: 20}); err == nil {
		t.Fatal("Restart deleted segments on a filesystem that cannot")
	}
	mustClose(t, w)
	w, rec := mustOpen(t, mem, wal.Options{}, 20)
	defer mustClose(t, w)
	if got := rec.log(); len(got) != 0 && got[len(got)-1].Index > 20 {
		t.Fatalf("entries after the restart's index came back: up to %d", got[len(got)-1].Index)
	}
	if got := w.LastIndex(); got != 20 {
		t.Fatalf("LastIndex = %d, want 20", got)
	}
	names, _ := mem.ReadDir(dir)
	if n := len(slices.DeleteFunc(names, func(n string) bool { return !strings.HasSuffix(n, ".wal") })); n != 1 {
		t.Fatalf("Open left %d segments: %v", n, names)
	}
}

// TestRestartNeedsSnapshot opens a restarted log with an older snapshot
// than the restart's: the entries in between are gone, which Open says
// (here from the segment's name, before it reads the restart record).
func TestRestartNeedsSnapshot(t *testing.T) {
	mem := vfs.NewMem()
	mustClose(t, restarted(t, mem))
	if _, _, err := open(t, mem, wal.Options{}, 10); err == nil || !strings.Contains(err.Error(), "entries 11 to 20 are missing") {
		t.Fatalf("Open with a snapshot at 10 of a log restarted after 20 = %v", err)
	}
}
