package wal_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/frame"
	"github.com/flintkv/flint/internal/seedtest"
	"github.com/flintkv/flint/internal/vfs"
	"github.com/flintkv/flint/internal/wal"
)

// TestPreallocate writes a log whose segments start from spare files of
// zeros, reads it back whole, and tears unsynced writes over the zeros: the
// log reopens with every synced entry.
func TestPreallocate(t *testing.T) {
	m := vfs.NewMem()
	opt := wal.Options{SegmentSize: 512, Preallocate: true}
	w, _ := mustOpen(t, m, opt, 0)
	var want []raftpb.Entry
	next := uint64(1)
	save := func(w *wal.WAL) {
		es := entries(next, next+1, 1)
		mustSave(t, w, es, hardState(1, 1, next-1))
		want = append(want, es...)
		next += 2
	}
	for i := 0; i < 10_000 && w.Metrics().Spares < 3; i++ {
		save(w) // the spare is written in the background: go on until three were used
	}
	if n := w.Metrics().Spares; n < 3 {
		t.Fatalf("%d segments started from a spare after 10,000 saves, want 3", n)
	}
	full := 0
	for _, s := range segments(t, m) {
		if b := readFile(t, m, s); len(b) >= 512 && b[len(b)-1] == 0 {
			full++ // started full size, with zeros still after its frames
		}
	}
	if full == 0 {
		t.Fatal("no segment file holds zeros after its frames")
	}
	mustClose(t, w)
	if names, _ := m.ReadDir(dir); slices.Contains(names, "spare.tmp") {
		t.Fatal("Close left the spare file")
	}

	rng := rand.New(rand.NewPCG(seedtest.Seed(t), 0))
	opt.NoSync = true // so that a crash can tear the writes
	var logBuf bytes.Buffer
	opt.Logger = logger(&logBuf)
	for round := range 20 {
		w, r := mustOpen(t, m, opt, 0)
		checkEntries(t, "replay", r.entries(), want)
		durable := len(want)
		for range 1 + rng.IntN(5) {
			save(w)
		}
		powerLoss(m, rng)
		w, r = mustOpen(t, m, opt, 0)
		got := r.entries()
		if len(got) < durable || len(got) > len(want) {
			t.Fatalf("round %d: after a crash, replayed %s; want %d to %d entries", round, span(got), durable, len(want))
		}
		checkEntries(t, "replay after a crash", got, want[:len(got)])
		want = got
		next = uint64(len(want)) + 1
		mustClose(t, w)
	}
	if n := strings.Count(logBuf.String(), "truncated a torn write"); n == 0 {
		t.Fatal("20 crashes tore no write over the zeros")
	}
}

// TestNoSpareWithoutRoom: a disk with less than two segments of room left
// gets no spare, and the log goes on.
func TestNoSpareWithoutRoom(t *testing.T) {
	m := vfs.NewMem()
	m.SetCapacity(1500)
	w, _ := mustOpen(t, m, wal.Options{SegmentSize: 1000, Preallocate: true}, 0)
	for i := range uint64(5) {
		mustSave(t, w, entries(i+1, i+1, 1), hardState(1, 1, i))
	}
	mustClose(t, w)
	if names, _ := m.ReadDir(dir); slices.Contains(names, "spare.tmp") || w.Metrics().Spares != 0 {
		t.Fatalf("a spare was made with less than two segments of room: %v, %d used", names, w.Metrics().Spares)
	}
}

// TestStaleSpareRemoved: Open deletes a spare left by an earlier process,
// which is not part of the log.
func TestStaleSpareRemoved(t *testing.T) {
	m := vfs.NewMem()
	w, _ := mustOpen(t, m, small, 0)
	mustSave(t, w, entries(1, 3, 1), hardState(1, 1, 0))
	mustClose(t, w)
	writeFile(t, m, "spare.tmp", []byte("left by a crash"))
	w, r := mustOpen(t, m, small, 0)
	defer mustClose(t, w)
	checkEntries(t, "replay", r.entries(), entries(1, 3, 1))
	if _, err := m.ReadFile(path.Join(dir, "spare.tmp")); err == nil {
		t.Fatal("Open kept a stale spare file")
	}
}

// TestTornTailOS repairs torn tails on the real filesystem, in preallocated
// segments that are mapped and read ahead when the log opens: the repair
// truncates a mapped file, which must wait until nothing touches its pages
// any more (touching a mapped page past the end of its file is fatal).
func TestTornTailOS(t *testing.T) {
	d := t.TempDir()
	var logBuf bytes.Buffer
	opt := wal.Options{SegmentSize: 4 << 20, Preallocate: true, Logger: logger(&logBuf)}
	var want []raftpb.Entry
	next := uint64(1)
	for round := range 10 {
		r := &recorder{}
		w, err := wal.Open(vfs.OS, d, opt, 0, r.replay())
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		checkEntries(t, fmt.Sprintf("round %d: replay", round), r.entries(), want)
		for i := 0; i < 50 || (round == 0 && w.Metrics().Spares == 0 && i < 100_000); i++ {
			es := entries(next, next, 1)
			es[0].Data = bytes.Repeat([]byte{byte(next)}, 1000)
			mustSave(t, w, es, hardState(1, 1, next-1))
			want = append(want, es...)
			next++
		}
		mustClose(t, w)
		tearLastSegment(t, d)
	}
	if n := strings.Count(logBuf.String(), "truncated a torn write"); n != 9 {
		t.Fatalf("%d torn tails truncated in 9 reopenings of a torn log", n)
	}
}

// tearLastSegment writes half a frame after the last frame of the newest
// segment in d, as a write cut short by a crash would leave it.
func tearLastSegment(t *testing.T, d string) {
	t.Helper()
	names, err := vfs.OS.ReadDir(d)
	if err != nil {
		t.Fatal(err)
	}
	var last string
	for _, n := range names {
		if strings.HasSuffix(n, ".wal") {
			last = n
		}
	}
	name := path.Join(d, last)
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	s := frame.NewScanner(b)
	for {
		if _, _, err := s.Next(); err != nil {
			break
		}
	}
	torn := frame.Append(nil, 2, bytes.Repeat([]byte("x"), 300))
	f, err := os.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(torn[:len(torn)/2], s.Offset()); err != nil {
		t.Fatal(err)
	}
}

// TestFailedOpenDropsSpare: an Open that fails after it started preparing
// a spare stops that work and removes the spare, leaving no goroutine that
// writes to the directory, or holds a file, after Open returns.
func TestFailedOpenDropsSpare(t *testing.T) {
	m := vfs.NewMem()
	f := vfs.NewFaulty(m)
	f.FailSyncDir(syscall.EIO) // creating the first segment fails
	if _, _, err := open(t, f, wal.Options{Preallocate: true, SegmentSize: 1 << 20}, 0); err == nil {
		t.Fatal("Open succeeded")
	}
	for range 2 {
		names, _ := m.ReadDir(dir)
		if slices.Contains(names, "spare.tmp") {
			t.Fatalf("after a failed Open the directory holds %v", names)
		}
		time.Sleep(100 * time.Millisecond) // time for a leaked goroutine to show
	}
}
