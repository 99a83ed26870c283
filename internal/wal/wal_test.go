package wal_test

import (
	"bytes"
	"fmt"
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

// small makes segments of a few records.
var small = wal.Options{SegmentSize: 300}

func TestRoundTrip(t *testing.T) {
	m := vfs.NewMem()
	w, r := mustOpen(t, m, small, 0)
	if len(r.recs) != 0 {
		t.Fatalf("a new log replayed %v", r.recs)
	}
	var want []raftpb.Entry
	var hs raftpb.HardState
	var hss []raftpb.HardState
	next := uint64(1)
	for i := range 60 {
		es := entries(next, next+uint64(i%4), 1+uint64(i/10))
		if i%5 == 3 {
			es = nil // a hard state alone
		}
		if i%3 != 1 && hs != hardState(1+uint64(i/10), 1, next-1) {
			hs = hardState(1+uint64(i/10), 1, next-1)
			hss = append(hss, hs)
		}
		mustSave(t, w, es, hs)
		want = append(want, es...)
		next += uint64(len(es))
	}
	mustSave(t, w, nil, raftpb.HardState{}) // nothing to write
	mustSave(t, w, nil, hs)                 // the same hard state: nothing to write
	if mt := w.Metrics(); mt.LastIndex != next-1 || mt.Segments < 5 || mt.Writes == 0 || mt.Syncs == 0 || mt.Bytes == 0 {
		t.Fatalf("metrics %+v: want LastIndex %d, several segments", mt, next-1)
	}
	segs := segments(t, m)
	if len(segs) < 5 {
		t.Fatalf("%d segments, want several", len(segs))
	}
	mt := w.Metrics()
	mustClose(t, w)
	var total int64
	for _, s := range segs {
		total += int64(len(readFile(t, m, s)))
	}
	if mt.LogBytes != total || mt.Segments != len(segs) {
		t.Fatalf("metrics say %d segments of %d bytes, the directory has %d of %d", mt.Segments, mt.LogBytes, len(segs), total)
	}
	m.Crash() // everything was synced

	w, r = mustOpen(t, m, small, 0)
	checkEntries(t, "replay", r.entries(), want)
	if got := r.hardState(); got != hs {
		t.Fatalf("hard state %v, want %v", got, hs)
	}
	// The hard states come in the order saved, each segment repeating the
	// current one after its header.
	var gotHS []raftpb.HardState
	for _, x := range r.recs {
		if x.isHS && (len(gotHS) == 0 || gotHS[len(gotHS)-1] != x.hs) {
			gotHS = append(gotHS, x.hs)
		}
	}
	if !slices.Equal(gotHS[1:], hss) || gotHS[0] != (raftpb.HardState{}) {
		t.Fatalf("hard states %v, want {0 0 0} then %v", gotHS, hss)
	}
	if mt := w.Metrics(); mt.LastIndex != next-1 || mt.Segments != len(segs) || mt.LogBytes != total {
		t.Fatalf("metrics after reopening %+v, want LastIndex %d, %d segments of %d bytes", mt, next-1, len(segs), total)
	}

	// Saving after reopening continues the log, in new segments too.
	more := entries(next, next+30, 9)
	for i := range more {
		mustSave(t, w, more[i:i+1], hardState(9, 1, more[i].Index))
	}
	want = append(want, more...)
	mustClose(t, w)
	m.Crash()
	w, r = mustOpen(t, m, small, 0)
	defer mustClose(t, w)
	checkEntries(t, "replay after more saves", r.entries(), want)
	if got, want := r.hardState(), hardState(9, 1, more[len(more)-1].Index); got != want {
		t.Fatalf("hard state %v, want %v", got, want)
	}
	if n := len(segments(t, m)); n <= len(segs) {
		t.Fatalf("%d segments after saving more, want more than %d", n, len(segs))
	}
}

// TestBigEntries saves entries larger than a segment: each gets a segment.
func TestBigEntries(t *testing.T) {
	m := vfs.NewMem()
	w, _ := mustOpen(t, m, wal.Options{SegmentSize: 100}, 0)
	var want []raftpb.Entry
	for i := uint64(1); i <= 5; i++ {
		e := raftpb.Entry{Index: i, Term: 1, Data: bytes.Repeat([]byte{byte(i)}, 1000*int(i))}
		mustSave(t, w, []raftpb.Entry{e}, hardState(1, 1, i))
		want = append(want, e)
	}
	mustSave(t, w, []raftpb.Entry{{Index: 6, Term: 1}}, hardState(1, 1, 6)) // empty data
	want = append(want, raftpb.Entry{Index: 6, Term: 1})
	mustClose(t, w)
	if n := len(segments(t, m)); n != 6 {
		t.Fatalf("%d segments, want 6", n)
	}
	w, r := mustOpen(t, m, wal.Options{SegmentSize: 100}, 0)
	defer mustClose(t, w)
	checkEntries(t, "replay", r.entries(), want)
}

// TestEntryTooLarge checks that an entry too large for a record is refused
// and nothing is written: the reader would take such a record for damage.
func TestEntryTooLarge(t *testing.T) {
	m := vfs.NewMem()
	w, _ := mustOpen(t, m, wal.Options{}, 0)
	mustSave(t, w, []raftpb.Entry{{Index: 1, Term: 1, Data: []byte("a")}}, hardState(1, 1, 1))
	big := raftpb.Entry{Index: 2, Term: 1, Data: make([]byte, frame.MaxLen)} // never touched
	if err := w.Save([]raftpb.Entry{big}, hardState(1, 1, 2)); err == nil || !strings.Contains(err.Error(), "more than a log record can") {
		t.Fatalf("Save of a %d-byte entry: %v, want refused", len(big.Data), err)
	}
	mustClose(t, w)
	w, r := mustOpen(t, m, wal.Options{}, 0)
	defer mustClose(t, w)
	checkEntries(t, "replay", r.entries(), []raftpb.Entry{{Index: 1, Term: 1, Data: []byte("a")}})
}

// TestAfter checks Open's after argument: a new log starts at after+1, and an
// existing log must hold every entry after it.
func TestAfter(t *testing.T) {
	m := vfs.NewMem()
	w, r := mustOpen(t, m, small, 41)
	if segs := segments(t, m); !slices.Equal(segs, []string{segName(1, 42)}) {
		t.Fatalf("a new log after 41 has segments %v, want %v", segs, segName(1, 42))
	}
	if len(r.recs) != 0 {
		t.Fatalf("a new log replayed %v", r.recs)
	}
	if mt := w.Metrics(); mt.LastIndex != 41 || mt.Segments != 1 {
		t.Fatalf("a new log after 41 has metrics %+v, want LastIndex 41 and 1 segment", mt)
	}
	want := entries(42, 80, 3)
	for i := 0; i < len(want); i += 3 {
		mustSave(t, w, want[i:min(i+3, len(want))], hardState(3, 1, want[i].Index))
	}
	mustClose(t, w)

	// Reopening after any index from 41 to the last replays the whole log:
	// the caller skips what its snapshot holds.
	for _, after := range []uint64{41, 42, 60, 80} {
		w, r := mustOpen(t, m, small, after)
		checkEntries(t, fmt.Sprintf("replay after %d", after), r.entries(), want)
		if mt := w.Metrics(); mt.LastIndex != 80 {
			t.Fatalf("after %d: LastIndex %d, want 80", after, mt.LastIndex)
		}
		mustClose(t, w)
	}
	// An earlier snapshot leaves entries missing.
	_, _, err := open(t, m, small, 40)
	checkWalError(t, err, segName(1, 42), 0, "missing", "41")
	_, _, err = open(t, m, small, 0)
	checkWalError(t, err, segName(1, 42), 0, "missing", "1 to 41")
}

// TestLogBehindSnapshot: with NoSync, a log that ends before the snapshot
// (its tail lost to a power loss) opens, and the entries saved after it go
// to a new segment, so that the log opens again. With fsync such a log has
// lost acknowledged entries: Open reports it.
func TestLogBehindSnapshot(t *testing.T) {
	m := vfs.NewMem()
	noSync := wal.Options{SegmentSize: small.SegmentSize, NoSync: true}
	w, _ := mustOpen(t, m, noSync, 0)
	old := entries(1, 5, 1)
	mustSave(t, w, old, hardState(1, 1, 5))
	mustClose(t, w)
	_, _, err := open(t, m, small, 10)
	checkWalError(t, err, segName(1, 1), 312, "ends at entry 5, before the snapshot's 10") // the end of its last write
	w, r := mustOpen(t, m, noSync, 10)
	checkEntries(t, "replay behind the snapshot", r.entries(), old)
	if mt := w.Metrics(); mt.LastIndex != 10 {
		t.Fatalf("LastIndex %d, want the snapshot's 10", mt.LastIndex)
	}
	later := entries(11, 12, 1)
	mustSave(t, w, later, hardState(1, 1, 12))
	mustClose(t, w)
	if segs := segments(t, m); segs[len(segs)-1] != segName(2, 11) {
		t.Fatalf("segments %v, want the last to be %s", segs, segName(2, 11))
	}
	for _, after := range []uint64{10, 11} {
		w, r = mustOpen(t, m, small, after)
		checkEntries(t, fmt.Sprintf("replay after %d", after), r.entries(), append(slices.Clone(old), later...))
		mustClose(t, w)
	}
	// Entries the snapshot lacks must still be there.
	_, _, err = open(t, m, small, 9)
	checkWalError(t, err, segName(1, 1), 312, "ends at entry 5", "starts at 11", "entries 10 to 10 are missing (the snapshot ends at 9)")
}

// TestTruncation saves entries that repeat indexes, as raft does when a new
// leader overwrites the tail of the log: Open reports the records in file
// order, and accepts any index up to one past the last.
func TestTruncation(t *testing.T) {
	m := vfs.NewMem()
	w, _ := mustOpen(t, m, small, 0)
	var saved []raftpb.Entry
	save := func(es []raftpb.Entry, hs raftpb.HardState) {
		t.Helper()
		mustSave(t, w, es, hs)
		saved = append(saved, es...)
	}
	for i := uint64(1); i <= 30; i++ {
		save(entries(i, i, 1), hardState(1, 1, i-1))
	}
	segs := segments(t, m)
	if len(segs) < 4 {
		t.Fatalf("%d segments, want several", len(segs))
	}
	lastFirst := segmentFirst(t, segs[len(segs)-1])
	if lastFirst < 15 {
		t.Fatalf("the last segment starts at %d; the test wants it after 15", lastFirst)
	}
	// Overwrite from 12, before the start of the segment being written,
	// then from the last index, then from one past it.
	save(entries(12, 14, 2), hardState(2, 2, 11))
	save(entries(14, 16, 3), hardState(3, 3, 11))
	save(entries(17, 17, 3), hardState(3, 3, 11))
	// Overwrite in the batch that starts a new segment.
	for n := w.Metrics().Segments; w.Metrics().Segments == n; {
		save(entries(18, 18, 3), hardState(3, 3, 12))
	}
	save(entries(13, 13, 4), hardState(4, 4, 12))
	mustClose(t, w)

	w, r := mustOpen(t, m, small, 0)
	checkEntries(t, "replay in file order", r.entries(), saved)
	wantLog := append(entries(1, 11, 1), entries(12, 12, 2)...)
	wantLog = append(wantLog, entry(13, 4))
	checkEntries(t, "log", r.log(), wantLog)
	if mt := w.Metrics(); mt.LastIndex != 13 {
		t.Fatalf("LastIndex %d, want 13", mt.LastIndex)
	}
	// The log continues after the last entry saved.
	mustSave(t, w, entries(14, 15, 4), hardState(4, 4, 13))
	mustClose(t, w)
	w, r = mustOpen(t, m, small, 0)
	checkEntries(t, "log after reopening", r.log(), append(wantLog, entries(14, 15, 4)...))

	// A gap is damage, even in the last segment.
	last := segments(t, m)[len(segments(t, m))-1]
	content := readFile(t, m, last)
	fr := framesOf(t, content)
	mustClose(t, w)
	w, _ = mustOpen(t, m, wal.Options{SegmentSize: 1 << 20}, 0)
	mustSave(t, w, entries(17, 17, 4), raftpb.HardState{}) // 16 is missing
	mustClose(t, w)
	_, _, err := open(t, m, small, 0)
	end := fr[len(fr)-1].off + fr[len(fr)-1].size
	checkWalError(t, err, last, end, "entry 17 follows entry 15")
	if got := readFile(t, m, last); int64(len(got)) <= end {
		t.Fatalf("Open cut the segment with the gap to %d bytes", len(got))
	}
}

// TestReleaseTo deletes the segments a snapshot covers.
func TestReleaseTo(t *testing.T) {
	m := vfs.NewMem()
	w, _ := mustOpen(t, m, small, 0)
	hs := hardState(7, 3, 5)
	mustSave(t, w, entries(1, 5, 7), hs)
	for i := uint64(6); i <= 60; i++ {
		mustSave(t, w, entries(i, i, 7), hs) // the hard state is written once
	}
	segs := segments(t, m)
	if len(segs) < 6 {
		t.Fatalf("%d segments, want several", len(segs))
	}
	firsts := make([]uint64, len(segs))
	for i, s := range segs {
		firsts[i] = segmentFirst(t, s)
	}
	// The segments left after releasing to index: those after the last
	// one whose successor starts at or before index+1.
	kept := func(index uint64) []string {
		n := 0
		for n+1 < len(segs) && firsts[n+1] <= index+1 {
			n++
		}
		return segs[n:]
	}
	if got := kept(0); !slices.Equal(got, segs) {
		t.Fatalf("test bug: kept(0) = %v", got)
	}
	for index := uint64(0); index <= 70; index++ {
		want := kept(index)
		if err := w.ReleaseTo(index); err != nil {
			t.Fatalf("ReleaseTo(%d): %v", index, err)
		}
		if got := segments(t, m); !slices.Equal(got, want) {
			t.Fatalf("after ReleaseTo(%d) the segments are %v, want %v", index, got, want)
		}
		// Every segment left but the first starts after index+1, and the
		// first one starts at or before it: nothing after index is gone,
		// and nothing kept is wholly covered.
		if f := segmentFirst(t, want[0]); f > index+1 {
			t.Fatalf("after ReleaseTo(%d) the log starts at %d", index, f)
		}
		if len(want) > 1 && segmentFirst(t, want[1]) <= index+1 {
			t.Fatalf("after ReleaseTo(%d) %s is kept though the next segment starts at %d", index, want[0], segmentFirst(t, want[1]))
		}
		var size int64
		for _, s := range want {
			size += int64(len(readFile(t, m, s)))
		}
		if mt := w.Metrics(); mt.Segments != len(want) || mt.LogBytes != size {
			t.Fatalf("after ReleaseTo(%d) metrics %+v, want %d segments of %d bytes", index, mt, len(want), size)
		}
		if index%10 == 0 && index <= 60 {
			// The deletions are durable, and the log opens after index
			// with the hard state saved before the deleted segments. (A
			// log opened after its last entry starts a new segment: see
			// TestLogBehindSnapshot.)
			mustClose(t, w)
			m.Crash()
			if got := segments(t, m); !slices.Equal(got, want) {
				t.Fatalf("after ReleaseTo(%d) and a crash the segments are %v, want %v", index, got, want)
			}
			var r *recorder
			w, r = mustOpen(t, m, small, index)
			if got := r.hardState(); got != hs {
				t.Fatalf("after ReleaseTo(%d) the hard state is %v, want %v", index, got, hs)
			}
			log := r.log()
			if len(log) == 0 || log[0].Index > index+1 || log[len(log)-1].Index != 60 {
				t.Fatalf("after ReleaseTo(%d) the log holds %s", index, span(log))
			}
			if index < 60 {
				checkEntries(t, "log after index", log[index+1-log[0].Index:], entries(index+1, 60, 7))
			}
		}
	}
	// The last segment is never deleted, and the log still works.
	if got := segments(t, m); len(got) != 1 || got[0] != segs[len(segs)-1] {
		t.Fatalf("after releasing everything the segments are %v, want only %s", got, segs[len(segs)-1])
	}
	if err := w.ReleaseTo(1000); err != nil {
		t.Fatal(err)
	}
	mustSave(t, w, entries(61, 61, 8), hardState(8, 3, 60))
	mustClose(t, w)
	w, r := mustOpen(t, m, small, 60)
	defer mustClose(t, w)
	if got := r.hardState(); got != hardState(8, 3, 60) {
		t.Fatalf("hard state %v", got)
	}
	if log := r.log(); log[len(log)-1].Index != 61 {
		t.Fatalf("log %s, want it to end at 61", span(log))
	}
}

// TestReleaseAfterLostRewrite: a segment started for a rewrite of the
// log's tail that a power loss took is named for the rewrite, but the log
// read at Open goes on from the entries it was to replace. ReleaseTo must
// keep them until a snapshot covers them, or the log no longer opens.
func TestReleaseAfterLostRewrite(t *testing.T) {
	m := vfs.NewMem()
	opt := wal.Options{SegmentSize: 1} // a segment for each write
	w, _ := mustOpen(t, m, opt, 0)
	mustSave(t, w, entries(1, 10, 1), hardState(1, 1, 0))
	if err := w.Append(entries(2, 3, 2), hardState(2, 1, 0)); err != nil { // lost below
		t.Fatal(err)
	}
	mustClose(t, w)
	m.Crash()
	w, r := mustOpen(t, m, opt, 0)
	checkEntries(t, "log after the crash", r.log(), entries(1, 10, 1))
	mustSave(t, w, entries(11, 12, 1), hardState(2, 1, 0))
	if segs := segments(t, m); len(segs) != 4 || segmentFirst(t, segs[2]) != 2 {
		t.Fatalf("segments %v, want 4, the third named for the lost rewrite at 2", segs)
	}
	for _, index := range []uint64{8, 10} {
		if err := w.ReleaseTo(index); err != nil {
			t.Fatal(err)
		}
		mustClose(t, w)
		w, r = mustOpen(t, m, opt, index)
		log := r.log()
		checkEntries(t, fmt.Sprintf("log after ReleaseTo(%d)", index), log[index-log[0].Index+1:], entries(index+1, 12, 1))
	}
	mustClose(t, w)
	if segs := segments(t, m); len(segs) != 1 || segmentFirst(t, segs[0]) != 11 {
		t.Fatalf("segments %v after ReleaseTo(10), want only the last", segs)
	}
}

// TestConcurrentRelease runs Save, ReleaseTo and Metrics at the same time,
// for the race detector.
func TestConcurrentRelease(t *testing.T) {
	m := vfs.NewMem()
	w, _ := mustOpen(t, m, wal.Options{SegmentSize: 200, NoSync: true}, 0)
	const n = 400
	var wg sync.WaitGroup
	released := make(chan uint64, n)
	wg.Go(func() {
		defer close(released)
		for i := uint64(1); i <= n; i++ {
			if err := w.Save(entries(i, i, 1), hardState(1, 1, i)); err != nil {
				t.Error(err)
				return
			}
			released <- i - 1
		}
	})
	wg.Go(func() {
		for i := range released {
			if err := w.ReleaseTo(i); err != nil {
				t.Error(err)
				return
			}
			_ = w.Metrics()
		}
	})
	wg.Wait()
	if mt := w.Metrics(); mt.Segments > 2 || mt.LastIndex != n {
		t.Fatalf("metrics %+v, want at most 2 segments and LastIndex %d", mt, n)
	}
	mustClose(t, w)
	w, r := mustOpen(t, m, wal.Options{}, n-1)
	defer mustClose(t, w)
	if log := r.log(); len(log) == 0 || log[len(log)-1].Index != n || log[0].Index > n {
		t.Fatalf("log %s", span(log))
	}
}

// TestCrash saves without fsyncs and crashes, tearing writes at random: Open
// must succeed and replay a prefix of what was saved that holds everything
// that was synced.
func TestCrash(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedtest.Seed(t), 0))
	for iter := range 60 {
		m := vfs.NewMem()
		f := vfs.NewFaulty(m)
		// Synced: a few segments.
		w, _ := mustOpen(t, f, wal.Options{SegmentSize: 600}, 0)
		next := uint64(1)
		for range 1 + rng.IntN(20) {
			es := entries(next, next+uint64(rng.IntN(3)), 1)
			mustSave(t, w, es, hardState(1, 1, next))
			next += uint64(len(es))
		}
		mustClose(t, w)
		w, r := mustOpen(t, f, wal.Options{SegmentSize: 1 << 20, NoSync: iter%2 == 0}, 0)
		syncedRecs := r.recs
		full := append([]rec(nil), syncedRecs...)
		// Not synced: with NoSync, or with every fsync failing.
		if iter%2 == 1 {
			f.FailSync(fmt.Errorf("injected"))
		}
		for range 1 + rng.IntN(10) {
			es := entries(next, next+uint64(rng.IntN(3)), 2)
			hs := hardState(2, 1, next)
			err := w.Save(es, hs)
			if iter%2 == 0 && err != nil {
				t.Fatal(err)
			}
			for _, e := range es {
				full = append(full, entryRec(e))
			}
			full = append(full, hsRec(hs))
			next += uint64(len(es))
			if err != nil {
				break // the WAL refuses writes now
			}
		}
		powerLoss(m, rng)
		f.Heal()

		w, r = mustOpen(t, f, small, 0)
		got := r.recs
		if len(got) < len(syncedRecs) || len(got) > len(full) || !slices.EqualFunc(got, full[:len(got)], recEqual) {
			t.Fatalf("iteration %d: replayed %v\nwant a prefix of %v\nholding %v", iter, got, full, syncedRecs)
		}
		// The log goes on from what it holds.
		last := r.log()[len(r.log())-1].Index
		mustSave(t, w, entries(last+1, last+1, 3), hardState(3, 1, last))
		mustClose(t, w)
		w, r = mustOpen(t, f, small, 0)
		if !slices.EqualFunc(r.recs[:len(got)], got, recEqual) {
			t.Fatalf("iteration %d: reopening replayed %v, want %v first", iter, r.recs, got)
		}
		if log := r.log(); log[len(log)-1].Index != last+1 {
			t.Fatalf("iteration %d: the log is %s, want it to end at %d", iter, span(log), last+1)
		}
		mustClose(t, w)
	}
}

func recEqual(a, b rec) bool {
	return a.isHS == b.isHS && a.hs == b.hs && a.e.Index == b.e.Index && a.e.Term == b.e.Term &&
		a.e.Type == b.e.Type && bytes.Equal(a.e.Data, b.e.Data)
}

// TestOpenCreatesDir opens a log in a directory that does not exist yet,
// on the real filesystem.
func TestOpenCreatesDir(t *testing.T) {
	d := path.Join(t.TempDir(), "a", "b")
	r := &recorder{}
	w, err := wal.Open(vfs.OS, d, wal.Options{SegmentSize: 128, Logger: discard}, 0, r.replay())
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 20; i++ {
		mustSave(t, w, entries(i, i, 1), hardState(1, 1, i))
	}
	mustClose(t, w)
	r = &recorder{}
	w, err = wal.Open(vfs.OS, d, wal.Options{SegmentSize: 128, Logger: discard}, 0, r.replay())
	if err != nil {
		t.Fatal(err)
	}
	defer mustClose(t, w)
	checkEntries(t, "replay", r.entries(), entries(1, 20, 1))
}

// TestAppendSync checks that Append writes without an fsync, that Sync makes
// the writes durable, and that starting a segment makes the previous one
// durable first: a crash may only tear the last segment.
func TestAppendSync(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedtest.Seed(t), 0))
	for iter := range 50 {
		m := vfs.NewMem()
		w, _ := mustOpen(t, m, small, 0)
		mustSave(t, w, entries(1, 3, 1), hardState(1, 1, 0))
		syncs := w.Metrics().Syncs
		if err := w.Sync(); err != nil || w.Metrics().Syncs != syncs {
			t.Fatalf("Sync with nothing appended: %v, %d fsyncs, want %d", err, w.Metrics().Syncs, syncs)
		}
		next, synced := uint64(4), uint64(3)
		for range 1 + rng.IntN(30) {
			es := entries(next, next+uint64(rng.IntN(3)), 1)
			if err := w.Append(es, hardState(1, 1, next)); err != nil {
				t.Fatal(err)
			}
			next += uint64(len(es))
			if rng.IntN(4) == 0 {
				if err := w.Sync(); err != nil {
					t.Fatal(err)
				}
				synced = next - 1
			}
		}
		if w.Metrics().Segments < 2 && iter == 0 {
			t.Log("no new segment in the first iteration")
		}
		powerLoss(m, rng)
		w, r := mustOpen(t, m, small, 0)
		log := r.log()
		if len(log) < int(synced) || len(log) > int(next-1) {
			t.Fatalf("iteration %d: replayed %s, want at least 1..%d and at most 1..%d", iter, span(log), synced, next-1)
		}
		checkEntries(t, "replay", log, append(entries(1, 3, 1), entries(4, uint64(len(log)), 1)...))
		mustClose(t, w)
	}
}
