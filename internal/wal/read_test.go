package wal_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/frame"
	"github.com/flintkv/flint/internal/seedtest"
	"github.com/flintkv/flint/internal/vfs"
	"github.com/flintkv/flint/internal/wal"
)

// TestEntries reads back a log of many segments, one that a truncation
// rewrote across segments, before and after ReleaseTo and reopening.
func TestEntries(t *testing.T) {
	m := vfs.NewMem()
	w, _ := mustOpen(t, m, small, 0)
	var log []raftpb.Entry
	save := func(es []raftpb.Entry) {
		t.Helper()
		mustSave(t, w, es, hardState(es[0].Term, 1, es[0].Index-1))
		log = applyLog(log, es)
	}
	for i := uint64(1); i <= 40; i += 3 {
		save(entries(i, i+2, 1))
	}
	if n := len(segments(t, m)); n < 6 {
		t.Fatalf("%d segments, want several", n)
	}
	save(entries(9, 12, 2)) // rewrites entries from segments before the last
	for i := uint64(13); i <= 30; i++ {
		save(entries(i, i, 3))
	}
	checkReads(t, w, log, 1)

	// Released entries read as ErrReleased; the rest are still there.
	if err := w.ReleaseTo(15); err != nil {
		t.Fatal(err)
	}
	first := w.FirstIndex()
	if first <= 1 || first > 16 {
		t.Fatalf("FirstIndex %d after ReleaseTo(15), want 2 to 16", first)
	}
	if _, err := w.Entries(first-1, 20, math.MaxUint64); !errors.Is(err, wal.ErrReleased) {
		t.Fatalf("Entries(%d, 20) after ReleaseTo(15): %v, want ErrReleased", first-1, err)
	}
	if _, err := w.Term(first - 1); !errors.Is(err, wal.ErrReleased) {
		t.Fatalf("Term(%d) after ReleaseTo(15): %v, want ErrReleased", first-1, err)
	}
	checkReads(t, w, log, first)

	// Open's replay builds the same index.
	mustClose(t, w)
	w, _ = mustOpen(t, m, small, 15)
	defer mustClose(t, w)
	checkReads(t, w, log, first)
}

// checkReads checks everything Entries and Term return for the log from
// first on against log, which holds at least the entries first to its end.
func checkReads(t *testing.T, w *wal.WAL, log []raftpb.Entry, first uint64) {
	t.Helper()
	last := log[len(log)-1].Index
	if got := w.FirstIndex(); got != first {
		t.Fatalf("FirstIndex %d, want %d", got, first)
	}
	if got := w.LastIndex(); got != last {
		t.Fatalf("LastIndex %d, want %d", got, last)
	}
	want := log[first-log[0].Index:]
	for lo := first; lo <= last+1; lo++ {
		if term, err := w.Term(lo); lo <= last && (err != nil || term != want[lo-first].Term) {
			t.Fatalf("Term(%d) = %d, %v, want %d", lo, term, err, want[lo-first].Term)
		}
		for hi := lo; hi <= last+1; hi++ {
			for _, max := range []uint64{0, 60, 200, math.MaxUint64} {
				got, err := w.Entries(lo, hi, max)
				if err != nil {
					t.Fatalf("Entries(%d, %d, %d): %v", lo, hi, max, err)
				}
				checkEntries(t, fmt.Sprintf("Entries(%d, %d, %d)", lo, hi, max), got, limitSize(want[lo-first:hi-first], max))
			}
		}
	}
	if _, err := w.Entries(first, last+2, math.MaxUint64); !errors.Is(err, wal.ErrUnavailable) {
		t.Fatalf("Entries past the end: %v, want ErrUnavailable", err)
	}
	if _, err := w.Term(last + 1); !errors.Is(err, wal.ErrUnavailable) {
		t.Fatalf("Term past the end: %v, want ErrUnavailable", err)
	}
}

// limitSize is raft's rule for how many of ents a read returns: at least
// one, then as many as keep their total size at most max.
func limitSize(ents []raftpb.Entry, max uint64) []raftpb.Entry {
	size := uint64(0)
	for i := range ents {
		size += uint64(ents[i].Size())
		if i > 0 && size > max {
			return ents[:i]
		}
	}
	return ents
}

// TestEntriesRandom saves, truncates, releases, crashes and reopens a log at
// random, checking after each step that reading it back gives what a
// model of the log holds.
func TestEntriesRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedtest.Seed(t), 0))
	m := vfs.NewMem()
	opt := wal.Options{SegmentSize: 100 + rng.Int64N(1000)}
	w, _ := mustOpen(t, m, opt, 0)
	var log []raftpb.Entry // the model: the log from released+1 on, or earlier
	// As with raft, a snapshot (released) covers only durable entries, and
	// a rewrite only entries after it.
	released, durable, term := uint64(0), uint64(0), uint64(1)
	for step := range 400 {
		last := w.LastIndex()
		switch op := rng.IntN(10); {
		case op < 6: // save, maybe rewriting the tail
			from := last + 1
			if rng.IntN(4) == 0 && last > released {
				from = released + 1 + rng.Uint64N(last-released)
				term++
			}
			es := entries(from, from+rng.Uint64N(5), term)
			var err error
			if rng.IntN(3) == 0 {
				err = w.Append(es, hardState(term, 1, from-1)) // not synced: a crash may tear it
				durable = min(durable, from-1)
			} else {
				err = w.Save(es, hardState(term, 1, from-1))
				durable = es[len(es)-1].Index
			}
			if err != nil {
				t.Fatalf("step %d: saving %s: %v", step, span(es), err)
			}
			log = applyLog(log, es)
		case op < 7 && durable > 0:
			released = max(released, rng.Uint64N(durable+1))
			if err := w.ReleaseTo(released); err != nil {
				t.Fatal(err)
			}
		case op < 8: // reopen, maybe after a power loss
			mustClose(t, w)
			if rng.IntN(2) == 0 {
				powerLoss(m, rng)
			}
			var r *recorder
			w, r = mustOpen(t, m, opt, released)
			log = r.log()
			if len(log) > 0 {
				term = max(term, log[len(log)-1].Term)
				durable = log[len(log)-1].Index
			}
		}
		checkModel(t, step, w, log, released)
	}
	mustClose(t, w)
}

// checkModel checks that w holds the entries of log after released and
// reads them back as they are.
func checkModel(t *testing.T, step int, w *wal.WAL, log []raftpb.Entry, released uint64) {
	t.Helper()
	first, last := w.FirstIndex(), w.LastIndex()
	if len(log) == 0 {
		if first != 1 || last != 0 {
			t.Fatalf("step %d: the log is empty, but the WAL holds %d to %d", step, first, last)
		}
		return
	}
	if first > released+1 || first < log[0].Index || last != log[len(log)-1].Index {
		t.Fatalf("step %d: the WAL holds %d to %d; want the log after %d, which ends at %d (the model holds %s)",
			step, first, last, released, log[len(log)-1].Index, span(log))
	}
	want := log[first-log[0].Index:]
	got, err := w.Entries(first, last+1, math.MaxUint64)
	if err != nil {
		t.Fatalf("step %d: Entries(%d, %d): %v", step, first, last+1, err)
	}
	checkEntries(t, fmt.Sprintf("step %d: Entries(%d, %d)", step, first, last+1), got, want)
	for i := range want {
		if term, err := w.Term(want[i].Index); err != nil || term != want[i].Term {
			t.Fatalf("step %d: Term(%d) = %d, %v, want %d", step, want[i].Index, term, err, want[i].Term)
		}
	}
}

// TestConcurrentReads reads the log while it is written, rewritten and
// released, for the race detector, and checks that a read never returns an
// entry that a rewrite replaced before the read began.
func TestConcurrentReads(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedtest.Seed(t), 0))
	m := vfs.NewMem()
	w, _ := mustOpen(t, m, wal.Options{SegmentSize: 400, NoSync: true}, 0)
	defer mustClose(t, w)
	var mu sync.Mutex
	replaced := map[[2]uint64]int{} // index and term of an entry replaced, by the rewrite that did
	rewrites := 0
	done := make(chan struct{})
	readRng := rand.New(rand.NewPCG(rng.Uint64(), 1))
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(done)
		term := uint64(1)
		var log []raftpb.Entry
		for len(log) == 0 || log[len(log)-1].Index < 2000 {
			from := uint64(len(log)) + 1
			if rng.IntN(10) == 0 && from > 20 {
				from -= 1 + rng.Uint64N(15)
				term++
			}
			es := entries(from, from+rng.Uint64N(4), term)
			if err := w.Save(es, hardState(term, 1, from-1)); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			for _, e := range log[min(from-1, uint64(len(log))):] {
				replaced[[2]uint64{e.Index, e.Term}] = rewrites + 1
			}
			rewrites++
			mu.Unlock()
			log = applyLog(log, es)
			if rng.IntN(20) == 0 {
				if err := w.ReleaseTo(from - min(from, 100)); err != nil {
					t.Error(err)
					return
				}
			}
		}
	})
	wg.Go(func() {
		rng := readRng
		for {
			select {
			case <-done:
				return
			default:
			}
			mu.Lock()
			before := rewrites
			mu.Unlock()
			first, last := w.FirstIndex(), w.LastIndex()
			if last+1 < first {
				continue
			}
			lo := first + rng.Uint64N(last-first+2)
			got, err := w.Entries(lo, last+1, rng.Uint64N(2000))
			if err != nil && !errors.Is(err, wal.ErrReleased) && !errors.Is(err, wal.ErrUnavailable) {
				t.Error(err)
				return
			}
			mu.Lock()
			for i, e := range got {
				if e.Index != lo+uint64(i) || string(e.Data) != string(entry(e.Index, e.Term).Data) {
					t.Errorf("Entries(%d, %d) returned %v at %d", lo, last+1, entryRec(e), i)
				}
				if n, ok := replaced[[2]uint64{e.Index, e.Term}]; ok && n <= before {
					t.Errorf("Entries(%d, %d) returned %v, replaced by rewrite %d before the read began", lo, last+1, entryRec(e), n)
				}
			}
			mu.Unlock()
			if t.Failed() {
				return
			}
		}
	})
	wg.Wait()
}

// openHook is an FS that calls hook, if set, before each Open.
type openHook struct {
	vfs.FS
	hook func(name string)
}

func (f *openHook) Open(name string) (vfs.File, error) {
	if f.hook != nil {
		f.hook(name)
	}
	return f.FS.Open(name)
}

// TestReleaseDuringRead: a read that located entries whose segment
// ReleaseTo then deletes returns ErrReleased.
func TestReleaseDuringRead(t *testing.T) {
	fs := &openHook{FS: vfs.NewMem()}
	w, _ := mustOpen(t, fs, small, 0)
	defer mustClose(t, w)
	for i := uint64(1); i <= 40; i += 2 {
		mustSave(t, w, entries(i, i+1, 1), hardState(1, 1, 0))
	}
	fs.hook = func(string) {
		fs.hook = nil
		if err := w.ReleaseTo(30); err != nil {
			t.Error(err)
		}
	}
	if _, err := w.Entries(1, 41, math.MaxUint64); !errors.Is(err, wal.ErrReleased) {
		t.Fatalf("Entries(1, 41) with ReleaseTo(30) during the read: %v, want ErrReleased", err)
	}
	first := w.FirstIndex()
	got, err := w.Entries(first, 41, math.MaxUint64)
	if err != nil {
		t.Fatal(err)
	}
	checkEntries(t, "the entries left", got, entries(first, 40, 1))
}

// TestEntriesDamage: damage to an entry's bytes on disk is found when it
// is read back.
func TestEntriesDamage(t *testing.T) {
	m := vfs.NewMem()
	w, _ := mustOpen(t, m, small, 0)
	defer mustClose(t, w)
	for i := uint64(1); i <= 40; i += 2 {
		mustSave(t, w, entries(i, i+1, 1), hardState(1, 1, 0))
	}
	name := segments(t, m)[0]
	b := readFile(t, m, name)
	frames := framesOf(t, b)
	fr := frames[slices.IndexFunc(frames, func(f frameInfo) bool { return f.typ == 2 })] // entry 1's
	b[fr.off+frame.HeaderSize+3]++                                                       // a byte of its payload
	writeFile(t, m, name, b)
	if _, err := w.Entries(2, 41, math.MaxUint64); err != nil {
		t.Fatalf("Entries(2, 41), after the damaged entry: %v", err)
	}
	_, err := w.Entries(1, 41, math.MaxUint64)
	if we := walError(t, err); path.Base(we.File) != name || we.Offset != fr.off || !strings.Contains(we.Reason, "checksum") {
		t.Fatalf("Entries(1, 41) of a damaged entry: %v, want a checksum error in %s at %d", err, name, fr.off)
	}
}
