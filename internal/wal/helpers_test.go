package wal_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/frame"
	"github.com/flintkv/flint/internal/vfs"
	"github.com/flintkv/flint/internal/wal"
)

// dir is the log directory used by the tests.
const dir = "wal"

// rec is one record a Replay reported: an entry or a hard state.
type rec struct {
	isHS bool
	e    raftpb.Entry
	hs   raftpb.HardState
}

func (r rec) String() string {
	if r.isHS {
		return fmt.Sprintf("hs{%d %d %d}", r.hs.Term, r.hs.Vote, r.hs.Commit)
	}
	return fmt.Sprintf("e{%d/%d %d %q}", r.e.Index, r.e.Term, r.e.Type, r.e.Data)
}

func entryRec(e raftpb.Entry) rec   { return rec{e: e} }
func hsRec(hs raftpb.HardState) rec { return rec{isHS: true, hs: hs} }
func hardState(term, vote, commit uint64) raftpb.HardState {
	return raftpb.HardState{Term: term, Vote: vote, Commit: commit}
}

// recorder records everything a Replay reports, in order.
type recorder struct {
	mu   sync.Mutex
	recs []rec
	// restart is the index of the last restart record, and restartAt how
	// many records came before it.
	restart, restartAt int
}

func (r *recorder) replay() wal.Replay {
	return wal.Replay{
		Entry: func(e raftpb.Entry) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			e.Data = bytes.Clone(e.Data) // only valid during the call
			r.recs = append(r.recs, entryRec(e))
			return nil
		},
		HardState: func(hs raftpb.HardState) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.recs = append(r.recs, hsRec(hs))
			return nil
		},
		Restart: func(index uint64) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.restart, r.restartAt = int(index), len(r.recs)
			return nil
		},
	}
}

// entries returns the entries reported, in the order reported.
func (r *recorder) entries() []raftpb.Entry {
	var es []raftpb.Entry
	for _, x := range r.recs {
		if !x.isHS {
			es = append(es, x.e)
		}
	}
	return es
}

// log returns the log the reported entries make: a later entry with index i
// replaces the entry i and every one after it, and a restart record drops
// every entry before it.
func (r *recorder) log() []raftpb.Entry {
	tail := &recorder{recs: r.recs[r.restartAt:]}
	return applyLog(nil, tail.entries())
}

// applyLog appends es to log as raft's log does: an entry with index i
// replaces the entry i and every entry after it.
func applyLog(log, es []raftpb.Entry) []raftpb.Entry {
	for _, e := range es {
		for len(log) > 0 && log[len(log)-1].Index >= e.Index {
			log = log[:len(log)-1]
		}
		log = append(log, e)
	}
	return log
}

// hardState returns the last hard state reported.
func (r *recorder) hardState() raftpb.HardState {
	for i := len(r.recs) - 1; i >= 0; i-- {
		if r.recs[i].isHS {
			return r.recs[i].hs
		}
	}
	return raftpb.HardState{}
}

// logger returns a logger writing text to buf.
func logger(buf *bytes.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, nil))
}

// discard is a logger that drops everything.
var discard = slog.New(slog.DiscardHandler)

// open opens the log in fs, recording the replay.
func open(t testing.TB, fs vfs.FS, opt wal.Options, after uint64) (*wal.WAL, *recorder, error) {
	t.Helper()
	if opt.Logger == nil {
		opt.Logger = discard
	}
	r := &recorder{}
	w, err := wal.Open(fs, dir, opt, after, r.replay())
	return w, r, err
}

// mustOpen is open for a log that must open.
func mustOpen(t testing.TB, fs vfs.FS, opt wal.Options, after uint64) (*wal.WAL, *recorder) {
	t.Helper()
	w, r, err := open(t, fs, opt, after)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return w, r
}

// mustClose closes w.
func mustClose(t testing.TB, w *wal.WAL) {
	t.Helper()
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// mustSave saves es and hs.
func mustSave(t testing.TB, w *wal.WAL, es []raftpb.Entry, hs raftpb.HardState) {
	t.Helper()
	if err := w.Save(es, hs); err != nil {
		t.Fatalf("Save(entries %s, %v): %v", span(es), hs, err)
	}
}

// span describes the indexes of es.
func span(es []raftpb.Entry) string {
	if len(es) == 0 {
		return "none"
	}
	return fmt.Sprintf("%d..%d", es[0].Index, es[len(es)-1].Index)
}

// entry returns an entry with data derived from its index and term, of a
// length that varies with the index.
func entry(index, term uint64) raftpb.Entry {
	n := int(index*7%41) + 1
	data := bytes.Repeat([]byte{byte('a' + index%26)}, n)
	copy(data, fmt.Sprintf("%d/%d", index, term))
	typ := raftpb.EntryNormal
	if index%17 == 0 {
		typ = raftpb.EntryConfChangeV2
	}
	return raftpb.Entry{Index: index, Term: term, Type: typ, Data: data}
}

// entries returns the entries from..to (inclusive) of term.
func entries(from, to, term uint64) []raftpb.Entry {
	var es []raftpb.Entry
	for i := from; i <= to; i++ {
		es = append(es, entry(i, term))
	}
	return es
}

// checkEntries fails unless got equals want.
func checkEntries(t testing.TB, what string, got, want []raftpb.Entry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d entries (%s), want %d (%s)", what, len(got), span(got), len(want), span(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Index != w.Index || g.Term != w.Term || g.Type != w.Type || !bytes.Equal(g.Data, w.Data) {
			t.Fatalf("%s: entry %d is %v, want %v", what, i, entryRec(g), entryRec(w))
		}
	}
}

// segments returns the segment files in the log directory, oldest first.
func segments(t testing.TB, fs vfs.FS) []string {
	t.Helper()
	names, err := fs.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(names, func(n string) bool { return !strings.HasSuffix(n, ".wal") })
}

// segmentFirst returns the first index in a segment's name.
func segmentFirst(t testing.TB, name string) uint64 {
	_, first := parseSegName(t, name)
	return first
}

// segmentSeq returns the sequence number in a segment's name.
func segmentSeq(t testing.TB, name string) uint64 {
	seq, _ := parseSegName(t, name)
	return seq
}

// parseSegName returns the sequence number and first index in a segment's
// name.
func parseSegName(t testing.TB, name string) (seq, first uint64) {
	t.Helper()
	if _, err := fmt.Sscanf(name, "%016x-%016x.wal", &seq, &first); err != nil {
		t.Fatalf("segment name %q: %v", name, err)
	}
	return seq, first
}

// segName returns the name of segment seq starting at first.
func segName(seq, first uint64) string { return fmt.Sprintf("%016x-%016x.wal", seq, first) }

// frameInfo locates a frame in a segment.
type frameInfo struct {
	off, size int64
	typ       byte
}

// framesOf parses the frames of a segment's content, which must all be
// valid.
func framesOf(t testing.TB, b []byte) []frameInfo {
	t.Helper()
	var fs []frameInfo
	r := frame.NewScanner(b)
	for {
		off := r.Offset()
		typ, _, err := r.Next()
		if err == io.EOF {
			return fs
		}
		if err != nil {
			t.Fatalf("segment does not parse: %v", err)
		}
		fs = append(fs, frameInfo{off: off, size: r.Offset() - off, typ: typ})
	}
}

// readFile returns the content of the segment name.
func readFile(t testing.TB, m *vfs.Mem, name string) []byte {
	t.Helper()
	b, err := m.ReadFile(path.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeFile replaces the content of the segment name.
func writeFile(t testing.TB, m *vfs.Mem, name string, b []byte) {
	t.Helper()
	if err := m.WriteFile(path.Join(dir, name), b); err != nil {
		t.Fatal(err)
	}
}

// walError returns err as a *wal.Error, failing if it is not one.
func walError(t testing.TB, err error) *wal.Error {
	t.Helper()
	var we *wal.Error
	if !errors.As(err, &we) {
		t.Fatalf("error %v (%T) is not a *wal.Error", err, err)
	}
	return we
}

// checkWalError fails unless err is a *wal.Error for the segment name at
// off whose reason contains each of the words.
func checkWalError(t testing.TB, err error, name string, off int64, words ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("Open succeeded, want an error for %s at offset %d", name, off)
	}
	we := walError(t, err)
	if path.Base(we.File) != name || we.Offset != off {
		t.Fatalf("error %q is for %s at offset %d, want %s at %d", err, we.File, we.Offset, name, off)
	}
	for _, w := range words {
		if !strings.Contains(we.Reason, w) {
			t.Fatalf("error %q does not mention %q", err, w)
		}
	}
}

// powerLoss crashes m as a power loss would, tearing unsynced writes either
// as a prefix or sector by sector, as rng chooses.
func powerLoss(m *vfs.Mem, rng *rand.Rand) {
	if rng.IntN(2) == 0 {
		m.CrashWith(rng)
	} else {
		m.CrashSectors(rng)
	}
}
