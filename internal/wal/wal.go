package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"sync"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/frame"
	"github.com/flintkv/flint/internal/vfs"
)

// Frame types of format version 3 (version 2 has all but typeRestart).
const (
	typeHeader    = 1
	typeEntry     = 2
	typeHardState = 3
	typeSeal      = 4
	typeRestart   = 5
)

const (
	magic      = "FLNTWAL1" // the file type, whatever the version
	version    = 3          // what new segments are written in
	minVersion = 2          // the oldest version read
)

// Options configure a WAL.
type Options struct {
	SegmentSize int64 // start a new segment after this many bytes; default 64 MiB
	NoSync      bool  // fsync only a full segment and a new one's start: a power loss can lose acknowledged writes
	// Preallocate writes each segment's zeros ahead of time, in the
	// background, so that appending never grows the file: see spare.go.
	Preallocate bool
	// HoldProcessor makes Sync keep its goroutine's processor through the
	// fsync (vfs.SyncHeld), for a process that has one to spare for it.
	HoldProcessor bool
	Logger        *slog.Logger // default slog.Default()
	// WaitForSpace, if set, is called when a write that Open must make
	// before the log can be used finds the disk full (err): starting the
	// first segment, or a new one, or writing again the torn start of the
	// last. It waits for space and reports whether Open should try the
	// write again; without it, or once it returns false, Open fails with
	// err.
	WaitForSpace func(err error) bool
}

// Replay receives the log's records, in file order, as Open reads them.
// Entry data stays valid and unchanged for the life of the process (the
// segments are mapped, see vfs.Map), so it may be kept without a copy.
type Replay struct {
	Entry     func(e raftpb.Entry) error
	HardState func(hs raftpb.HardState) error
	// Restart, if set, receives a restart record: every entry received
	// before it is no longer part of the log, which goes on after index
	// (see WAL.Restart).
	Restart func(index uint64) error
}

// ErrFailed is returned by every Save after an fsync or write failed: what
// the disk holds is unknown, so nothing more may be written.
var ErrFailed = errors.New("wal: an earlier write or fsync failed; the log refuses writes")

// Error is damage found at Open.
type Error struct {
	File   string
	Offset int64
	Reason string
}

func (e *Error) Error() string {
	return fmt.Sprintf("wal: %s at offset %d: %s", e.File, e.Offset, e.Reason)
}

// WAL is an open log. Save (or Append and Sync) and ReleaseTo may be
// called from different goroutines, and so may the readers (Entries, Term,
// FirstIndex, LastIndex, Metrics), at any time; Save calls must not
// overlap, nor may ReleaseTo calls.
type WAL struct {
	fs      vfs.FS
	dir     string
	opt     Options
	mu      sync.Mutex // guards segs and the fields below it
	segs    []segment  // live segments, oldest first; the last is being written
	size    int64      // total bytes of the live segments
	metrics Metrics
	// Invariant: idx locates every entry of the log after those that
	// ReleaseTo let go of, and idx.next-1 == last once Open returns.
	idx index
	// The fields below are used only by Save (and Open).
	f     vfs.File // the last segment
	off   int64    // end of the last valid frame in f
	last  uint64   // index of the last entry saved
	after uint64   // index of the snapshot that Open was given
	// restartSeq is the last segment Open read a restart record in, or 0.
	restartSeq uint64
	hs         raftpb.HardState
	buf        []byte
	pos        []int // offsets in buf of the entries' frames, during Append
	failed     error
	dirty      bool   // written since the last fsync
	seal       sealer // seals the writes to f
	spare      spare
	// multi holds the logs of the groups of a shared log (format version
	// 4, see OpenShared), and is nil for a log of one group, whose entries
	// idx, last, after, hs and restartSeq describe.
	multi *groups
}

// segment is one segment file.
type segment struct {
	seq, first uint64
	name       string
	size       int64
	// prev is the index of the last entry written before the segment, in
	// file order: the log's last when it was started, or, at Open, the
	// last entry read before it (first-1 for the first segment read). It
	// is first-1 unless the segment was started for a rewrite of the
	// log's tail (see ReleaseTo).
	prev uint64
}

// Metrics describe the log's activity since Open.
type Metrics struct {
	Syncs     int64         // fsyncs done by Save
	SyncTime  time.Duration // time spent in them
	MaxSync   time.Duration // the longest
	Writes    int64         // calls to Save that wrote
	Bytes     int64         // bytes written by Save
	Segments  int           // live segment files
	Spares    int64         // segments started from a preallocated spare file
	LogBytes  int64         // their total size
	LastIndex uint64        // index of the last entry saved
}

func segmentName(seq, first uint64) string { return fmt.Sprintf("%016x-%016x.wal", seq, first) }

func (w *WAL) withDefaults() {
	if w.opt.SegmentSize <= 0 {
		w.opt.SegmentSize = 64 << 20
	}
	if w.opt.Logger == nil {
		w.opt.Logger = slog.Default()
	}
}

// Save appends entries and the hard state (when it differs from the last one
// saved) and, unless NoSync, makes them durable before returning. A disk-full
// error (vfs.IsNoSpace) leaves the log's entries and hard state as they were
// (a segment it started may stay, holding none yet), and Save may be called
// again with the same arguments; any other error is permanent.
func (w *WAL) Save(entries []raftpb.Entry, hs raftpb.HardState) error {
	if err := w.Append(entries, hs); err != nil {
		return err
	}
	return w.Sync()
}

// Append is Save without the fsync: what it writes survives a crash of the
// process but not of the machine until the next Sync. Damage to what was
// appended since the last Sync but one cannot be told from a torn write
// (see the package doc).
func (w *WAL) Append(entries []raftpb.Entry, hs raftpb.HardState) error {
	if w.failed != nil {
		return w.failed
	}
	for i := range entries {
		if n := len(entries[i].Data); n > maxEntryData {
			return fmt.Errorf("wal: entry %d holds %d bytes, more than a log record can (%d): it is not written", entries[i].Index, n, maxEntryData)
		}
	}
	writeHS := !raft.IsEmptyHardState(hs) && hs != w.hs
	if len(entries) == 0 && !writeHS {
		return nil
	}
	w.buf, w.pos = w.buf[:0], w.pos[:0]
	for i := range entries {
		w.pos = append(w.pos, len(w.buf))
		w.buf = appendEntry(w.buf, &entries[i])
	}
	if writeHS {
		w.buf = appendHardState(w.buf, hs)
	}
	start, err := w.writeBuf(entries)
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		w.last = entries[len(entries)-1].Index
		w.mu.Lock()
		w.indexLocked(entries, start)
		w.metrics.LastIndex = w.last
		w.mu.Unlock()
	}
	if writeHS {
		w.hs = hs
	}
	if cap(w.buf) > 16<<20 {
		w.buf = nil
	}
	return nil
}

// writeBuf writes w.buf, the frames of entries (nil in a shared log) and
// other records, sealed, in the last segment, after starting a new one if
// it is full, and returns the offset it was written at.
func (w *WAL) writeBuf(entries []raftpb.Entry) (int64, error) {
	if err := w.makeRoom(entries, int64(len(w.buf))); err != nil {
		return 0, err
	}
	seal := w.seal
	w.buf = seal.close(w.buf)
	start := w.off
	if err := w.write(w.buf); err != nil {
		return 0, err
	}
	w.seal, w.dirty = seal, true
	return start, nil
}

// Restart makes the log start over after index: every entry it holds
// stops being part of it, and the next entry saved is index+1. It is for a
// member that installs a snapshot at index from its leader, which must be
// durable first (Open then needs a snapshot at index or later). hs, if not
// empty, is saved with it. Restart starts a new segment, writes a restart
// record in it and fsyncs it, even with NoSync, then deletes the earlier
// segments; if a crash comes first, Open deletes them. Its errors are
// Save's, and it must not overlap ReleaseTo.
func (w *WAL) Restart(index uint64, hs raftpb.HardState) error {
	if w.failed != nil {
		return w.failed
	}
	if !raft.IsEmptyHardState(hs) {
		w.hs = hs // the new segment starts with it
	}
	w.last = index
	if err := w.rotate(nil); err != nil {
		return err
	}
	b := frame.Append(nil, typeRestart, binary.AppendUvarint(nil, index))
	seal := w.seal
	b = seal.close(b)
	if err := w.write(b); err != nil {
		return err
	}
	w.seal, w.dirty = seal, true
	if err := w.sync(); err != nil {
		return w.fail(fmt.Errorf("wal: fsync %s: %w", w.lastName(), err))
	}
	w.dirty = false
	w.mu.Lock()
	w.idx.reset(index + 1)
	w.metrics.LastIndex = index
	w.mu.Unlock()
	return w.ReleaseTo(index)
}

// maxWrite is the most bytes one Append writes: half of what a segment can
// hold (maxIndexed), so that it fits a new segment, whatever its start.
const maxWrite = maxIndexed / 2

// makeRoom starts a new segment for a write of n bytes (before its seal)
// of entries if the last one is full, or if the spare is ready for a
// segment that grows, or if the write would take it past what the index
// can locate (maxIndexed), whatever Options.SegmentSize says. A write of
// more than maxWrite is refused.
func (w *WAL) makeRoom(entries []raftpb.Entry, n int64) error {
	if n > maxWrite {
		return fmt.Errorf("wal: a write of %d bytes, more than one write to a segment may hold (%d): it is not written", n, int64(maxWrite))
	}
	if w.off >= w.opt.SegmentSize || w.off+n > maxIndexed || (w.spare.grows && w.pollSpare()) {
		return w.rotate(entries)
	}
	return nil
}

// indexLocked adds entries, just written at start in the last segment
// (their frames at w.pos in the write), to the index.
func (w *WAL) indexLocked(entries []raftpb.Entry, start int64) {
	s := w.segs[len(w.segs)-1]
	for i := range entries {
		w.idx.add(s.seq, s.name, entries[i].Index, entries[i].Term, start+int64(w.pos[i]), w.off)
	}
}

// Sync makes everything appended durable, unless NoSync. A failure is
// permanent.
func (w *WAL) Sync() error {
	if w.failed != nil {
		return w.failed
	}
	if !w.dirty || w.opt.NoSync {
		return nil
	}
	start := time.Now()
	if err := w.sync(); err != nil {
		return w.fail(fmt.Errorf("wal: fsync %s: %w", w.lastName(), err))
	}
	w.dirty = false
	w.seal.reset(w.off)
	d := time.Since(start)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.metrics.Syncs++
	w.metrics.SyncTime += d
	w.metrics.MaxSync = max(w.metrics.MaxSync, d)
	return nil
}

// write appends b to the last segment. On a full disk it truncates the
// segment back and returns the error; other errors fail the log.
func (w *WAL) write(b []byte) error {
	n, err := w.f.WriteAt(b, w.off)
	if err == nil && n < len(b) {
		err = fmt.Errorf("short write of %d bytes out of %d", n, len(b))
	}
	if err != nil && vfs.IsNoSpace(err) {
		if terr := w.f.Truncate(w.off); terr != nil {
			return w.fail(fmt.Errorf("wal: undoing a write that found the disk full: %w", terr))
		}
		return fmt.Errorf("wal: %s: %w", w.lastName(), err)
	}
	if err != nil {
		return w.fail(fmt.Errorf("wal: write %s: %w", w.lastName(), err))
	}
	w.off += int64(len(b))
	w.mu.Lock()
	w.metrics.Writes++
	w.metrics.Bytes += int64(len(b))
	w.segs[len(w.segs)-1].size = w.off
	w.size += int64(len(b))
	w.mu.Unlock()
	return nil
}

func (w *WAL) fail(err error) error {
	if vfs.IsNoSpace(err) {
		// Callers retry an error that vfs.IsNoSpace accepts, as Save
		// promises that one leaves the log as it was: this one does not,
		// so it keeps only the text of its cause.
		w.failed = fmt.Errorf("%w: %v", ErrFailed, err)
	} else {
		w.failed = fmt.Errorf("%w: %w", ErrFailed, err)
	}
	return w.failed
}

func (w *WAL) lastName() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.segs[len(w.segs)-1].name
}

// rotate starts a new segment for entries. A full disk leaves the current
// segment in use and returns the error.
func (w *WAL) rotate(entries []raftpb.Entry) error {
	// The new segment's fsyncs will not cover this one. Even with NoSync it
	// is fsynced once: only the last segment may end torn after a power
	// loss, or the log would not open.
	if err := w.f.Sync(); err != nil {
		return w.fail(fmt.Errorf("wal: fsync %s: %w", w.lastName(), err))
	}
	w.dirty = false
	w.seal.reset(w.off) // for writes here, if a full disk stops the rotation
	first := w.last + 1
	if len(entries) > 0 {
		first = entries[0].Index
	}
	if w.multi != nil {
		first = 0 // see the shared log's format
	}
	w.mu.Lock()
	seq := w.segs[len(w.segs)-1].seq + 1
	w.mu.Unlock()
	f, size, seal, err := w.create(seq, first)
	if err != nil {
		return err
	}
	if err := w.f.Close(); err != nil {
		return w.fail(fmt.Errorf("wal: close %s: %w", w.lastName(), err))
	}
	w.f, w.off, w.seal = f, size, seal
	w.mu.Lock()
	w.segs = append(w.segs, segment{seq: seq, first: first, name: segmentName(seq, first), size: size, prev: w.last})
	w.size += size
	w.mu.Unlock()
	return nil
}

// create makes a durable new segment holding its header and the hard state,
// and returns it with its size and the sealer of its next write. It fsyncs
// the segment's start even with NoSync: once ReleaseTo deletes the segments
// before it, that start is the only copy of the hard state.
func (w *WAL) create(seq, first uint64) (vfs.File, int64, sealer, error) {
	name := path.Join(w.dir, segmentName(seq, first))
	b, seal := w.segmentStart(seq, first)
	f, err := w.takeSpare(name)
	if err == nil {
		_, err = f.WriteAt(b, 0)
		if err == nil {
			if err = f.Sync(); err == nil {
				seal.reset(int64(len(b)))
			}
		}
		if err == nil {
			err = w.fs.SyncDir(w.dir)
		}
		if err != nil {
			f.Close()
		}
	}
	if err != nil && vfs.IsNoSpace(err) {
		w.fs.Remove(name)
		return nil, 0, seal, fmt.Errorf("wal: starting segment %s: %w", name, err)
	}
	if err != nil {
		return nil, 0, seal, w.fail(fmt.Errorf("wal: starting segment %s: %w", name, err))
	}
	return f, int64(len(b)), seal, nil
}

// segmentStart returns the first write of a segment, its header and the
// current hard state (every group's, in a shared log), sealed, and the
// sealer of the next write.
func (w *WAL) segmentStart(seq, first uint64) ([]byte, sealer) {
	seal := newSealer(seq, first, 0)
	v := uint32(version)
	if w.multi != nil {
		v = sharedVersion
	}
	b := frame.Append(nil, typeHeader, headerPayload(seq, first, v))
	if w.multi != nil {
		w.mu.Lock()
		b = w.multi.appendHardStates(b)
		w.mu.Unlock()
	} else {
		b = appendHardState(b, w.hs)
	}
	return seal.close(b), seal
}

func headerPayload(seq, first uint64, v uint32) []byte {
	b := append([]byte(magic), 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(b[len(magic):], v)
	b = binary.LittleEndian.AppendUint64(b, seq)
	return binary.LittleEndian.AppendUint64(b, first)
}

// maxEntryData is the most data an entry's record holds: a frame's payload
// less the term, index and entry type (see the format).
const maxEntryData = frame.MaxPayload - 2*binary.MaxVarintLen64 - 1

func appendEntry(dst []byte, e *raftpb.Entry) []byte {
	dst, start := frame.Begin(dst, typeEntry)
	return frame.Finish(appendEntryBody(dst, e), start)
}

// appendEntryBody appends an entry's payload, less a group's tag.
func appendEntryBody(dst []byte, e *raftpb.Entry) []byte {
	dst = binary.AppendUvarint(dst, e.Term)
	dst = binary.AppendUvarint(dst, e.Index)
	dst = append(dst, byte(e.Type))
	return append(dst, e.Data...)
}

func appendHardState(dst []byte, hs raftpb.HardState) []byte {
	dst, start := frame.Begin(dst, typeHardState)
	return frame.Finish(appendHardStateBody(dst, hs), start)
}

// appendHardStateBody appends a hard state's payload, less a group's tag.
func appendHardStateBody(dst []byte, hs raftpb.HardState) []byte {
	dst = binary.AppendUvarint(dst, hs.Term)
	dst = binary.AppendUvarint(dst, hs.Vote)
	return binary.AppendUvarint(dst, hs.Commit)
}

// ReleaseTo deletes the segments that hold no entry after index: they are
// covered by a snapshot at index. The segment being written is never
// deleted. Segments are deleted oldest first, and the log forgets one only
// once it is gone: if a deletion fails, that segment and the ones after it
// stay in the log for the next ReleaseTo, so the files never have a gap,
// which Open would take for lost segments. Calls must not overlap.
//
// A segment goes only if its successor starts at or before index+1 and
// was started after an entry at or before index (prev): Open reads the
// segments left as if the snapshot's entries came before them, and a
// segment started for a rewrite of the log's tail follows entries up to
// prev, which may be after index. Its first entry, if a power loss took
// the rewrite, is the one after prev; and the entries the rewrite was to
// replace, still the log's, are in the segments before it.
//
// Entries and Term stop serving the entries of those segments before the
// files are deleted, even if deleting them fails: a read that located them
// before and finds a file gone returns ErrReleased.
func (w *WAL) ReleaseTo(index uint64) error {
	w.mu.Lock()
	n := 0
	for n+1 < len(w.segs) && w.segs[n+1].first <= index+1 && w.segs[n+1].prev <= index {
		n++
	}
	gone := append([]segment(nil), w.segs[:n]...)
	if n > 0 {
		w.idx.release(gone[n-1].seq)
	}
	w.mu.Unlock()
	return w.deleteSegments(gone)
}

// deleteSegments deletes gone, the oldest segments, and forgets those it
// deleted. It needs WAL.mu not held.
func (w *WAL) deleteSegments(gone []segment) error {
	removed, err := w.removeSegments(gone)
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.segs[:removed] { // Save only appends to segs
		w.size -= s.size
	}
	w.segs = w.segs[removed:]
	return err
}

// removeSegments deletes segs, oldest first, up to the first that cannot
// be deleted (one already gone counts as deleted), and syncs the directory
// if it deleted any. It returns how many it deleted and the first error.
func (w *WAL) removeSegments(segs []segment) (int, error) {
	var err error
	removed := 0
	for _, s := range segs {
		if rerr := w.fs.Remove(path.Join(w.dir, s.name)); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = fmt.Errorf("wal: deleting %s: %w", s.name, rerr)
			break
		}
		removed++
	}
	if removed > 0 {
		if serr := w.fs.SyncDir(w.dir); err == nil {
			err = serr
		}
	}
	return removed, err
}

// sync fsyncs the last segment, keeping the processor if asked to.
func (w *WAL) sync() error {
	if w.opt.HoldProcessor {
		return vfs.SyncHeld(w.f)
	}
	return w.f.Sync()
}

// Metrics returns the log's metrics. It may be called at any time.
func (w *WAL) Metrics() Metrics {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.metrics
	m.Segments, m.LogBytes = len(w.segs), w.size
	return m
}

// Close closes the segment being written.
func (w *WAL) Close() error {
	w.dropSpare()
	return w.f.Close()
}
