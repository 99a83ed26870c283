package wal_test

import (
	"bytes"
	"errors"
	"path"
	"slices"
	"strings"
	"syscall"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/vfs"
	"github.com/flintkv/flint/internal/wal"
)

// usage returns the bytes the files of the log's directory take: its
// segments, and a spare segment if one is there.
func usage(t testing.TB, m *vfs.Mem) int64 {
	t.Helper()
	names, err := m.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, name := range names {
		n += int64(len(readFile(t, m, name)))
	}
	return n
}

// snapshotDir returns the content of every segment.
func snapshotDir(t testing.TB, m *vfs.Mem) map[string][]byte {
	t.Helper()
	c := map[string][]byte{}
	for _, s := range segments(t, m) {
		c[s] = readFile(t, m, s)
	}
	return c
}

// checkDirUnchanged fails unless the segments are as in before.
func checkDirUnchanged(t testing.TB, m *vfs.Mem, before map[string][]byte) {
	t.Helper()
	after := snapshotDir(t, m)
	if len(after) != len(before) {
		t.Fatalf("segments %v, want %d as before", segments(t, m), len(before))
	}
	for s, b := range before {
		if !bytes.Equal(after[s], b) {
			t.Fatalf("%s changed from %d to %d bytes", s, len(b), len(after[s]))
		}
	}
}

// checkFailed fails unless err is a permanent failure.
func checkFailed(t testing.TB, err error, what string) {
	t.Helper()
	switch {
	case err == nil:
		t.Fatalf("%s succeeded", what)
	case !errors.Is(err, wal.ErrFailed):
		t.Fatalf("%s: error %v does not wrap ErrFailed", what, err)
	case vfs.IsNoSpace(err):
		t.Fatalf("%s: error %v is permanent but looks like a full disk, which callers retry", what, err)
	}
}

// TestPermanentFailures fails an fsync or a write: the Save fails, and so
// does every later one, as the disk's state is unknown.
func TestPermanentFailures(t *testing.T) {
	for _, tc := range []struct {
		name string
		arm  func(f *vfs.Faulty)
		// rotate makes the failing Save start a new segment.
		rotate bool
		// kept is whether the failed Save's records may be in the log.
		kept bool
	}{
		{name: "fsync", arm: func(f *vfs.Faulty) { f.FailSync(syscall.EIO) }, kept: true},
		{name: "fsync finds the disk full", arm: func(f *vfs.Faulty) { f.FailSync(syscall.ENOSPC) }, kept: true},
		{name: "write", arm: func(f *vfs.Faulty) { f.FailWrite(syscall.EIO) }},
		{name: "write midway", arm: func(f *vfs.Faulty) { f.FailAfterBytes(10, syscall.EIO) }, kept: true},
		{name: "fsync of a new segment", arm: func(f *vfs.Faulty) { f.FailSync(syscall.EIO) }, rotate: true},
		{name: "directory fsync of a new segment", arm: func(f *vfs.Faulty) { f.FailSyncDir(syscall.EIO) }, rotate: true},
		{name: "write of a new segment", arm: func(f *vfs.Faulty) { f.FailWrite(syscall.EIO) }, rotate: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := vfs.NewMem()
			f := vfs.NewFaulty(m)
			opt := wal.Options{SegmentSize: 1 << 20}
			if tc.rotate {
				opt.SegmentSize = 100
			}
			w, _ := mustOpen(t, f, opt, 0)
			mustSave(t, w, entries(1, 2, 1), hardState(1, 1, 0))
			if tc.rotate {
				mustSave(t, w, entries(3, 5, 1), hardState(1, 1, 2)) // the segment is full now
			}
			saved := w.Metrics().LastIndex
			tc.arm(f)
			err := w.Save(entries(saved+1, saved+2, 1), hardState(1, 1, saved))
			checkFailed(t, err, "Save")
			if !strings.Contains(err.Error(), ".wal") {
				t.Fatalf("Save's error %q does not name the file", err)
			}
			f.Heal()
			for _, try := range []struct {
				es []raftpb.Entry
				hs raftpb.HardState
			}{
				{entries(saved+1, saved+2, 1), hardState(1, 1, saved)},
				{nil, hardState(2, 1, saved)},
				{entries(saved+1, saved+1, 1), raftpb.HardState{}},
			} {
				checkFailed(t, w.Save(try.es, try.hs), "Save after a failure")
			}
			// Written but not synced counts as saved here.
			if mt := w.Metrics(); mt.LastIndex != saved && (!tc.kept || mt.LastIndex != saved+2) {
				t.Fatalf("LastIndex %d after failures, want %d", mt.LastIndex, saved)
			}
			w.Close()
			// The log opens with what was saved, and perhaps what was
			// written before the failure.
			w, r := mustOpen(t, m, opt, 0)
			defer mustClose(t, w)
			log := r.log()
			want := entries(1, saved, 1)
			if tc.kept && len(log) > int(saved) {
				want = entries(1, saved+2, 1)
			}
			checkEntries(t, "replay", log, want)
		})
	}
}

// TestDiskFull fills the disk during a Save: the Save fails with an error
// that vfs.IsNoSpace recognizes, leaves the log as it was, and succeeds
// once there is room.
func TestDiskFull(t *testing.T) {
	for _, tc := range []struct {
		name string
		room int64 // bytes free when the Save starts
	}{
		{"no room", 0},
		{"room for part of a frame header", 3},
		{"room for the first entry", 64},
		{"room for all but a byte", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := vfs.NewMem()
			w, _ := mustOpen(t, m, wal.Options{SegmentSize: 1 << 20}, 0)
			mustSave(t, w, entries(1, 10, 1), hardState(1, 1, 5))
			before := snapshotDir(t, m)
			es, hs := entries(11, 15, 1), hardState(1, 1, 10)
			room := tc.room
			if room < 0 {
				// Measure the Save's size on another log.
				m2 := vfs.NewMem()
				w2, _ := mustOpen(t, m2, wal.Options{SegmentSize: 1 << 20}, 0)
				mustSave(t, w2, entries(1, 10, 1), hardState(1, 1, 5))
				u := usage(t, m2)
				mustSave(t, w2, es, hs)
				room = usage(t, m2) - u - 1
			}
			m.SetCapacity(usage(t, m) + room)
			for range 3 {
				err := w.Save(es, hs)
				if err == nil || !vfs.IsNoSpace(err) || errors.Is(err, wal.ErrFailed) {
					t.Fatalf("Save on a full disk returned %v, want a full disk error", err)
				}
				checkDirUnchanged(t, m, before)
				if mt := w.Metrics(); mt.LastIndex != 10 {
					t.Fatalf("LastIndex %d after a failed Save, want 10", mt.LastIndex)
				}
			}
			// A log opened now holds only what was saved before.
			{
				m2 := vfs.NewMem()
				if err := vfs.MkdirAll(m2, dir); err != nil {
					t.Fatal(err)
				}
				for s, b := range before {
					writeFile(t, m2, s, b)
				}
				w2, r := mustOpen(t, m2, wal.Options{}, 0)
				checkEntries(t, "replay", r.entries(), entries(1, 10, 1))
				mustClose(t, w2)
			}
			m.SetCapacity(0)
			mustSave(t, w, es, hs)
			mustSave(t, w, entries(16, 16, 1), hardState(1, 1, 15))
			mustClose(t, w)
			m.Crash()
			w, r := mustOpen(t, m, wal.Options{}, 0)
			defer mustClose(t, w)
			checkEntries(t, "replay", r.entries(), entries(1, 16, 1))
			if got := r.hardState(); got != hardState(1, 1, 15) {
				t.Fatalf("hard state %v", got)
			}
		})
	}
}

// TestDiskFullFaulty fails writes with ENOSPC through a Faulty, partway,
// and with EDQUOT, as a full disk quota does.
func TestDiskFullFaulty(t *testing.T) {
	for i, n := range []int64{0, 1, 9, 50} {
		m := vfs.NewMem()
		f := vfs.NewFaulty(m)
		w, _ := mustOpen(t, f, wal.Options{}, 0)
		mustSave(t, w, entries(1, 3, 1), hardState(1, 1, 2))
		before := snapshotDir(t, m)
		f.FailAfterBytes(n, []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT}[i%2])
		err := w.Save(entries(4, 8, 1), hardState(1, 1, 3))
		if err == nil || !vfs.IsNoSpace(err) || errors.Is(err, wal.ErrFailed) {
			t.Fatalf("Save with %d bytes free returned %v, want a full disk error", n, err)
		}
		checkDirUnchanged(t, m, before)
		f.Heal()
		mustSave(t, w, entries(4, 8, 1), hardState(1, 1, 3))
		mustClose(t, w)
		w, r := mustOpen(t, m, wal.Options{}, 0)
		checkEntries(t, "replay", r.entries(), entries(1, 8, 1))
		mustClose(t, w)
	}
}

// TestDiskFullRotation fills the disk when a Save starts a new segment:
// no new segment is left behind, and the log works once there is room.
func TestDiskFullRotation(t *testing.T) {
	const start = headerSize + 16 + sealFrameSize // header, hard state, seal
	for _, room := range []int64{0, 10, 45, start - 1, start, start + 4} {
		m := vfs.NewMem()
		opt := wal.Options{SegmentSize: 200}
		w, _ := mustOpen(t, m, opt, 0)
		next := uint64(1)
		for w.Metrics().LogBytes < 200 {
			mustSave(t, w, entries(next, next, 1), hardState(1, 1, next))
			next++
		}
		if len(segments(t, m)) != 1 {
			t.Fatal("test bug: more than one segment")
		}
		before := snapshotDir(t, m)
		m.SetCapacity(usage(t, m) + room)
		for range 2 {
			err := w.Save(entries(next, next, 1), hardState(1, 1, next))
			if err == nil || !vfs.IsNoSpace(err) || errors.Is(err, wal.ErrFailed) {
				t.Fatalf("room %d: Save starting a segment on a full disk returned %v", room, err)
			}
			if !strings.Contains(err.Error(), segName(2, next)) {
				t.Fatalf("room %d: error %q does not name the new segment", room, err)
			}
			if room < start {
				checkDirUnchanged(t, m, before)
			} else if segs := segments(t, m); len(segs) != 2 || len(readFile(t, m, segs[1])) != start {
				// The new segment was started; the entry did not fit.
				t.Fatalf("room %d: segments %v after a failed Save", room, segs)
			}
			if mt := w.Metrics(); mt.Segments != len(segments(t, m)) || mt.LogBytes != usage(t, m) {
				t.Fatalf("room %d: metrics %+v after a failed rotation", room, mt)
			}
		}
		m.SetCapacity(0)
		mustSave(t, w, entries(next, next, 1), hardState(1, 1, next))
		if segs := segments(t, m); !slices.Equal(segs, []string{segName(1, 1), segName(2, next)}) {
			t.Fatalf("room %d: segments %v", room, segs)
		}
		mustClose(t, w)
		m.Crash()
		w, r := mustOpen(t, m, opt, 0)
		checkEntries(t, "replay", r.entries(), entries(1, next, 1))
		mustClose(t, w)
	}
}

// TestOpenDiskFull fills the disk when Open starts a new log.
func TestOpenDiskFull(t *testing.T) {
	m := vfs.NewMem()
	m.SetCapacity(10)
	if _, _, err := open(t, m, wal.Options{}, 5); err == nil || !vfs.IsNoSpace(err) {
		t.Fatalf("Open on a full disk returned %v", err)
	}
	if segs := segments(t, m); len(segs) != 0 {
		t.Fatalf("Open on a full disk left %v", segs)
	}
	m.SetCapacity(0)
	w, _ := mustOpen(t, m, wal.Options{}, 5)
	mustSave(t, w, entries(6, 6, 1), hardState(1, 1, 6))
	mustClose(t, w)
	if segs := segments(t, m); !slices.Equal(segs, []string{segName(1, 6)}) {
		t.Fatalf("segments %v", segs)
	}
}

// spaceWaiter is an Options.WaitForSpace that frees the disk of m when it
// is called the second time: the first time, the write fails again.
type spaceWaiter struct {
	m    *vfs.Mem
	errs []error
}

func (s *spaceWaiter) wait(err error) bool {
	s.errs = append(s.errs, err)
	if len(s.errs) == 2 {
		s.m.SetCapacity(0)
	}
	return true
}

// check fails unless s was called twice, each time for a full disk.
func (s *spaceWaiter) check(t *testing.T) {
	t.Helper()
	if len(s.errs) != 2 {
		t.Fatalf("WaitForSpace called %d times (%v), want 2", len(s.errs), s.errs)
	}
	for _, err := range s.errs {
		if !vfs.IsNoSpace(err) {
			t.Fatalf("WaitForSpace called with %v, want a full disk", err)
		}
	}
}

// TestOpenWaitsForSpace fills the disk before each of the writes that
// Open must make: with WaitForSpace, Open waits and makes them once space
// is freed; without, it fails as TestOpenDiskFull does.
func TestOpenWaitsForSpace(t *testing.T) {
	t.Run("a new log", func(t *testing.T) {
		m := vfs.NewMem()
		m.SetCapacity(10)
		s := &spaceWaiter{m: m}
		w, _ := mustOpen(t, m, wal.Options{WaitForSpace: s.wait}, 5)
		s.check(t)
		mustSave(t, w, entries(6, 6, 1), hardState(1, 1, 6))
		mustClose(t, w)
		if segs := segments(t, m); !slices.Equal(segs, []string{segName(1, 6)}) {
			t.Fatalf("segments %v", segs)
		}
	})
	t.Run("a torn segment start", func(t *testing.T) {
		l := newTestLog(t)
		name, size := addTornStart(t, l, 5)
		l.m.SetCapacity(usage(t, l.m))
		s := &spaceWaiter{m: l.m}
		w, r := mustOpen(t, l.m, wal.Options{WaitForSpace: s.wait}, 0)
		s.check(t)
		mustClose(t, w)
		checkEntries(t, "replay", r.entries(), l.entries)
		if got := int64(len(readFile(t, l.m, name))); got != size {
			t.Fatalf("Open left %s with %d bytes, want %d", name, got, size)
		}
		w, r = mustOpen(t, l.m, small, 0)
		defer mustClose(t, w)
		if got := r.recs[len(r.recs)-1]; !recEqual(got, hsRec(l.lastHS)) {
			t.Fatalf("the segment written again replays %v, want %v", got, hsRec(l.lastHS))
		}
	})
	t.Run("a log behind the snapshot", func(t *testing.T) {
		m := vfs.NewMem()
		noSync := wal.Options{SegmentSize: small.SegmentSize, NoSync: true}
		w, _ := mustOpen(t, m, noSync, 0)
		mustSave(t, w, entries(1, 5, 1), hardState(1, 1, 5))
		mustClose(t, w)
		m.SetCapacity(usage(t, m))
		s := &spaceWaiter{m: m}
		noSync.WaitForSpace = s.wait
		w, _ = mustOpen(t, m, noSync, 10)
		s.check(t)
		mustSave(t, w, entries(11, 11, 1), hardState(1, 1, 11))
		mustClose(t, w)
		if segs := segments(t, m); !slices.Equal(segs, []string{segName(1, 1), segName(2, 11)}) {
			t.Fatalf("segments %v", segs)
		}
	})
	t.Run("giving up", func(t *testing.T) {
		m := vfs.NewMem()
		m.SetCapacity(10)
		calls := 0
		giveUp := func(error) bool { calls++; return false }
		if _, _, err := open(t, m, wal.Options{WaitForSpace: giveUp}, 5); !vfs.IsNoSpace(err) || calls != 1 {
			t.Fatalf("Open = %v after %d calls of WaitForSpace, want a full disk after 1", err, calls)
		}
		if segs := segments(t, m); len(segs) != 0 {
			t.Fatalf("Open on a full disk left %v", segs)
		}
	})
}

// TestOpenFailures opens a log whose torn tail cannot be truncated durably.
func TestOpenFailures(t *testing.T) {
	l := newTestLog(t)
	name, b, _ := l.frames(t, -1)
	writeFile(t, l.m, name, b[:len(b)-sealFrameSize-3]) // in the last entry
	f := vfs.NewFaulty(l.m)
	f.FailSync(syscall.EIO)
	if _, _, err := open(t, f, wal.Options{}, 0); err == nil || !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), path.Join(dir, name)) {
		t.Fatalf("Open that cannot sync the truncated tail returned %v", err)
	}
	f.Heal()
	w, r := mustOpen(t, f, wal.Options{}, 0)
	defer mustClose(t, w)
	checkEntries(t, "replay", r.entries(), l.entries[:len(l.entries)-1])
}

// TestRestartSyncsSegmentName stops a process after it made a segment but
// before the segment's name was durable: its directory fsync failed, or the
// write of its start did. Killing the process there leaves the same state.
// The next process saves entries in that segment; a power loss must keep
// them, so Open must make the name durable before writing there.
func TestRestartSyncsSegmentName(t *testing.T) {
	rotation := wal.Options{SegmentSize: 256}
	for _, tc := range []struct {
		name string
		opt  wal.Options
		// fail arms f so that an Open or a Save fails while making a
		// segment; it returns the entries saved before.
		fail func(t *testing.T, f *vfs.Faulty) uint64
	}{
		{name: "directory fsync of a new log", fail: func(t *testing.T, f *vfs.Faulty) uint64 {
			f.SetFilter(func(name string) bool { return name == dir }) // not its parent's, when Open makes it
			f.FailSyncDir(syscall.EIO)
			if _, _, err := open(t, f, wal.Options{}, 0); err == nil {
				t.Fatal("Open succeeded with its directory fsync failing")
			}
			return 0
		}},
		{name: "directory fsync of a new segment", opt: rotation, fail: func(t *testing.T, f *vfs.Faulty) uint64 {
			w, _ := mustOpen(t, f, rotation, 0)
			mustSave(t, w, entries(1, 1, 1), hardState(1, 1, 0))
			f.FailSyncDir(syscall.EIO)
			return saveUntilFailure(w, 2)
		}},
		{name: "write of a new segment's start", opt: rotation, fail: func(t *testing.T, f *vfs.Faulty) uint64 {
			w, _ := mustOpen(t, f, rotation, 0)
			f.SetFilter(func(name string) bool { return strings.HasPrefix(path.Base(name), segName(2, 0)[:16]) })
			f.FailWrite(syscall.EIO)
			return saveUntilFailure(w, 1)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := vfs.NewMem()
			f := vfs.NewFaulty(m)
			saved := tc.fail(t, f)
			w, r := mustOpen(t, m, tc.opt, 0)
			checkEntries(t, "replay", r.entries(), entries(1, saved, 1))
			mustSave(t, w, entries(saved+1, saved+3, 1), hardState(1, 1, saved))
			m.Crash()
			w, r = mustOpen(t, m, tc.opt, 0)
			defer mustClose(t, w)
			checkEntries(t, "replay after a power loss", r.entries(), entries(1, saved+3, 1))
		})
	}
}

// saveUntilFailure saves one entry at a time, from index next, until a Save
// fails, and returns the index of the last one saved.
func saveUntilFailure(w *wal.WAL, next uint64) uint64 {
	for ; w.Save(entries(next, next, 1), hardState(1, 1, next-1)) == nil; next++ {
	}
	return next - 1
}

// TestNoSyncKeepsHardState deletes the segments before the last with
// NoSync; the hard state they held must survive a power loss in the last
// segment's start.
func TestNoSyncKeepsHardState(t *testing.T) {
	m := vfs.NewMem()
	opt := wal.Options{SegmentSize: 256, NoSync: true}
	w, _ := mustOpen(t, m, opt, 0)
	next := uint64(1)
	for ; len(segments(t, m)) < 3; next++ {
		mustSave(t, w, entries(next, next, 7), hardState(7, 1, next-1))
	}
	segs := segments(t, m)
	first := segmentFirst(t, segs[len(segs)-1])
	if err := w.ReleaseTo(first - 1); err != nil {
		t.Fatal(err)
	}
	m.Crash()
	w, r := mustOpen(t, m, opt, first-1)
	defer mustClose(t, w)
	if hs := r.hardState(); hs.Term != 7 || hs.Vote != 1 {
		t.Fatalf("hard state after a power loss is %+v, want term 7 and vote 1", hs)
	}
}

// TestFailedFsyncIsNotReadBack fails an fsync, as a disk's write error
// would, then starts a new process on the log without a power loss. Linux
// keeps the data it could not write in the page cache, as clean pages that
// no later fsync writes: the new process must read the log as the disk
// holds it, or it would replay records that a power loss takes away from
// under the records it adds after them.
func TestFailedFsyncIsNotReadBack(t *testing.T) {
	m := vfs.NewMem()
	f := vfs.NewFaulty(m)
	opt := wal.Options{SegmentSize: 1 << 20}
	w, _ := mustOpen(t, f, opt, 0)
	mustSave(t, w, entries(1, 2, 1), hardState(1, 1, 0))
	f.FailSync(syscall.EIO)
	checkFailed(t, w.Save(entries(3, 4, 1), hardState(1, 1, 2)), "Save")
	f.Heal()
	w.Close()

	w, r := mustOpen(t, f, opt, 0)
	checkEntries(t, "replay after the failed fsync", r.log(), entries(1, 2, 1))
	mustSave(t, w, entries(3, 6, 2), hardState(2, 1, 2))
	mustClose(t, w)
	m.Crash()
	w, r = mustOpen(t, m, opt, 0)
	defer mustClose(t, w)
	checkEntries(t, "replay after a power loss", r.log(), append(entries(1, 2, 1), entries(3, 6, 2)...))
}

// TestStaleSegmentsBeforeAGap opens a log whose oldest segments were left
// behind by a release that failed partway, before ReleaseTo kept such
// segments with the rest: with a snapshot that covers them, they are
// deleted and the log opens; with one that does not, the gap is damage.
func TestStaleSegmentsBeforeAGap(t *testing.T) {
	m := vfs.NewMem()
	opt := wal.Options{SegmentSize: 200}
	w, _ := mustOpen(t, m, opt, 0)
	for i := uint64(1); i <= 30; i++ {
		mustSave(t, w, entries(i, i, 1), hardState(1, 1, i))
	}
	all := segments(t, m)
	stale := []string{all[0], all[2]} // two gaps: after each of them
	kept := map[string][]byte{}
	for _, name := range stale {
		kept[name] = readFile(t, m, name)
	}
	if err := w.ReleaseTo(20); err != nil {
		t.Fatal(err)
	}
	mustClose(t, w)
	next := segments(t, m)[0]
	if segmentSeq(t, next) <= segmentSeq(t, all[3]) {
		t.Fatalf("ReleaseTo(20) left %v, want a gap after %s", segments(t, m), all[3])
	}
	for name, b := range kept {
		writeFile(t, m, name, b) // as if deleting it had failed
	}

	f := segmentFirst(t, next)
	for _, after := range []uint64{0, f - 2} {
		if _, _, err := open(t, m, opt, after); err == nil || !strings.Contains(err.Error(), "are missing before it") {
			t.Fatalf("Open after a snapshot at %d, with entries from %d after the gap: %v, want the missing segments named", after, f, err)
		}
	}
	w, r := mustOpen(t, m, opt, f-1)
	mustClose(t, w)
	for _, name := range stale {
		if slices.Contains(segments(t, m), name) {
			t.Fatalf("Open left %s, which the snapshot covers", name)
		}
	}
	log := r.log()
	checkEntries(t, "replay after the snapshot", log[len(log)-10:], entries(21, 30, 1))

	// Two segments numbered alike are refused, naming both.
	dup := segName(segmentSeq(t, next), f+1)
	writeFile(t, m, dup, readFile(t, m, next))
	if _, _, err := open(t, m, opt, f-1); err == nil || !strings.Contains(err.Error(), "a second segment numbered") || !strings.Contains(err.Error(), next) {
		t.Fatalf("Open with two segments numbered %d: %v", segmentSeq(t, next), err)
	}
}
