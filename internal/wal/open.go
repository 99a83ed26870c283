package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/frame"
	"github.com/flintkv/flint/internal/vfs"
)

// Open opens the log in dir, creating dir and a first segment if there is
// none, and passes every record to replay in file order. after is the index
// of the snapshot the caller restored: the log must hold every entry after
// it, and a new log starts at after+1. With Options.NoSync, a power loss
// can take the log's tail and leave it ending before after: the log then
// holds nothing the snapshot lacks, and new entries go to a new segment that
// starts at after+1. Without NoSync such a log has lost acknowledged
// entries, which is damage. Damage is reported as an *Error.
func Open(fs vfs.FS, dir string, opt Options, after uint64, replay Replay) (_ *WAL, err error) {
	w := &WAL{fs: fs, dir: dir, opt: opt, last: after, after: after}
	w.withDefaults()
	w.idx.reset(after + 1)
	defer w.abandonIf(&err)
	segs, err := w.prepare()
	if err != nil {
		return nil, err
	}
	if segs, err = w.dropStale(segs, after); err != nil {
		return nil, err
	}
	if len(segs) == 0 {
		w.metrics.LastIndex = after
		if err := w.whenSpace(func() error { return w.start(1, after+1) }); err != nil {
			return nil, err
		}
		w.startSpare()
		return w, nil
	}
	if segs[0].first > after+1 {
		return nil, &Error{File: segs[0].name, Reason: fmt.Sprintf(
			"the log starts at entry %d but the snapshot ends at %d: entries %d to %d are missing; restore the data directory from a backup",
			segs[0].first, after, after+1, segs[0].first-1)}
	}
	w.last = segs[0].first - 1
	w.idx.reset(segs[0].first)
	if err := w.settle(segs[len(segs)-1]); err != nil {
		return nil, err
	}
	w.loseLastWrite(segs[len(segs)-1])
	if err := w.replay(segs, replay); err != nil {
		return nil, err
	}
	if err := w.dropBeforeRestart(); err != nil {
		return nil, err
	}
	if w.last < after {
		if !opt.NoSync {
			// With fsync, entries after the snapshot are durable before
			// the snapshot is taken: the tail of the log was lost.
			return nil, &Error{File: path.Join(dir, w.segs[len(w.segs)-1].name), Offset: w.off, Reason: fmt.Sprintf(
				"the log ends at entry %d, before the snapshot's %d: its last segment is missing or was cut short. "+
					"If the node ran with --fsync never and lost power, that is expected: move the wal directory aside to start from the snapshot alone; "+
					"otherwise restore the data directory from a backup", w.last, after)}
		}
		w.opt.Logger.Warn("wal: the log ends before the snapshot, as a power loss without fsync can leave it; new entries start a new segment",
			"dir", dir, "last", w.last, "snapshot", after)
		w.last = after
		w.idx.reset(after + 1) // the entries it holds are all in the snapshot
		if err := w.whenSpace(func() error { return w.rotate(nil) }); err != nil {
			return nil, err
		}
	}
	w.metrics.LastIndex = w.last
	w.startSpare()
	return w, nil
}

// abandonIf lets go of the spare being prepared and of the last segment
// if *err, Open's error, is not nil.
func (w *WAL) abandonIf(err *error) {
	if *err != nil {
		w.dropSpare()
		if w.f != nil {
			w.f.Close()
		}
	}
}

// prepare makes the log's directory, deletes a spare left by an earlier
// process, and returns the segments there.
func (w *WAL) prepare() ([]segment, error) {
	if err := vfs.MkdirAll(w.fs, w.dir); err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	if err := w.removeStaleSpare(); err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	return w.list()
}

// whenSpace makes write, one that Open must make, and makes it again for as
// long as it finds the disk full and Options.WaitForSpace says to. A write
// that finds the disk full leaves things so that it may be made again (see
// create, rotate and rewriteHeader).
func (w *WAL) whenSpace(write func() error) error {
	if w.opt.WaitForSpace == nil {
		return write()
	}
	return vfs.RetryNoSpace(write, w.opt.WaitForSpace)
}

// settle makes the last segment, s, durable as it is on the disk, before it
// is read. Only the last segment may hold writes not yet synced: rotate
// syncs a segment before it starts the next, and a failed fsync fails the
// log, which then starts none. If the process that wrote them stopped
// before syncing them, they are made durable here, and writes acknowledged
// after them are not lost with them at a power loss. If its fsync failed,
// the page cache may hold writes that never reached the disk, as clean
// pages that no fsync writes (see vfs.File.DropCache): they are evicted, so
// that the log is read as a power loss would leave it, and nothing that
// power loss would take is replayed and built upon. (The eviction leaves
// pages that a process maps: the last process to serve this directory held
// its lock, and so has exited, mappings and all.) A write error that the
// stopped process never saw, as its fsync never came, is reported by this
// fsync, and Open fails; the next Open finds it reported and goes on.
func (w *WAL) settle(s segment) error {
	name := path.Join(w.dir, s.name)
	f, err := w.fs.OpenRW(name)
	if err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("wal: fsync %s: %w", name, err)
	}
	if err := f.DropCache(); err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	return nil
}

// replay maps every segment, then reads them in order, with a prefetcher
// reading the disk ahead across all of them. The last segment stays open.
func (w *WAL) replay(segs []segment, replay Replay) error {
	maps := make([][]byte, len(segs))
	for i, s := range segs {
		b, err := w.mapSegment(s)
		if err != nil {
			return err
		}
		maps[i] = b
	}
	pf := vfs.Prefetch(maps...)
	defer pf.Stop()
	var base int64 // of the segment being read, over all of them
	var tail *frame.Error
	for i, s := range segs {
		if err := w.follows(s); err != nil {
			return err
		}
		segBase := base
		progress := func(off int64) { pf.Advance(segBase + off) }
		s.prev = w.last
		s, fe, err := w.recover(s, maps[i], i == len(segs)-1, replay, progress)
		if err != nil {
			return err
		}
		w.segs = append(w.segs, s)
		w.size += s.size
		base += int64(len(maps[i]))
		tail = fe
	}
	// Repairing a torn tail truncates the mapped last segment, and touching
	// a mapped page past the end of its file is a fatal fault: the
	// prefetcher must be done first.
	pf.Stop()
	last := &w.segs[len(w.segs)-1]
	s, err := w.reopenLast(*last, maps[len(maps)-1], tail)
	if err != nil {
		return err
	}
	w.size += s.size - last.size
	*last = s
	return nil
}

// follows checks that segment s, about to be read, starts no later than
// the entry after those read before it (or after the snapshot's, if
// later). A segment's first index is the next entry's when it is made, so
// a later one means that the segment before it was cut short, at the end
// of a write or into zeros, both of which read as a clean end; the entries
// of s would catch the gap, but s may have none yet.
func (w *WAL) follows(s segment) error {
	if len(w.segs) == 0 || s.first <= w.next() {
		return nil
	}
	prev := w.segs[len(w.segs)-1]
	return &Error{File: path.Join(w.dir, prev.name), Offset: prev.size, Reason: fmt.Sprintf(
		"the segment ends at entry %d, and the next, %s, starts at %d: entries %d to %d are missing (the snapshot ends at %d); "+
			"this segment is not the last, so it was cut short or damaged: restore the data directory from a backup",
		w.last, s.name, s.first, w.next(), s.first-1, w.after)}
}

// next returns the index of the next entry replay may read without a gap:
// the one after the last read, or after the snapshot's if later.
func (w *WAL) next() uint64 { return max(w.last, w.after) + 1 }

// mapSegment maps segment s (see vfs.Map).
func (w *WAL) mapSegment(s segment) ([]byte, error) {
	f, err := w.fs.Open(path.Join(w.dir, s.name))
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	defer f.Close()
	b, err := vfs.Map(f)
	if err != nil {
		return nil, fmt.Errorf("wal: %s: %w", s.name, err)
	}
	return b, nil
}

// start begins an empty log with its first segment.
func (w *WAL) start(seq, first uint64) error {
	f, size, seal, err := w.create(seq, first)
	if err != nil {
		return err
	}
	w.f, w.off, w.seal = f, size, seal
	w.segs = []segment{{seq: seq, first: first, name: segmentName(seq, first), size: size, prev: first - 1}}
	w.size = size
	return nil
}

// dropStale checks that no segment is missing between the first and the
// last, and returns them. Segments before a gap are left over from a
// release that failed partway, by a version before ReleaseTo kept them
// whole, if the snapshot covers every entry in them, that is, if the
// segment after the gap starts at or before after+1: they are deleted, with
// a warning. Any other gap is damage.
func (w *WAL) dropStale(segs []segment, after uint64) ([]segment, error) {
	for i := len(segs) - 1; i > 0; i-- {
		if segs[i].seq == segs[i-1].seq+1 {
			continue
		}
		if segs[i].first > after+1 {
			return nil, &Error{File: segs[i].name, Reason: fmt.Sprintf("segments %d to %d are missing before it; restore them, or the data directory, from a backup",
				segs[i-1].seq+1, segs[i].seq-1)}
		}
		// A failed deletion is logged, not returned: Open reads no stale
		// segment, and the next Open tries again.
		stale := segs[:i]
		_, err := w.removeSegments(stale)
		w.opt.Logger.Warn("wal: deleted the segments left before a gap in the log, which the snapshot covers",
			"dir", w.dir, "first", stale[0].name, "last", stale[len(stale)-1].name, "count", len(stale), "snapshot", after, "err", err)
		return segs[i:], nil
	}
	return segs, nil
}

// list returns the segments in dir in order, checking that no two have the
// same sequence number.
func (w *WAL) list() ([]segment, error) {
	names, err := w.fs.ReadDir(w.dir)
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	var segs []segment
	for _, name := range names {
		if !strings.HasSuffix(name, ".wal") {
			continue
		}
		var s segment
		if n, err := fmt.Sscanf(name, "%016x-%016x.wal", &s.seq, &s.first); n != 2 || err != nil || segmentName(s.seq, s.first) != name {
			return nil, &Error{File: name, Reason: "not a segment name (<seq>-<first>.wal, 16 hex digits each); move the file out of the log directory"}
		}
		s.name = name
		if len(segs) > 0 && s.seq == segs[len(segs)-1].seq {
			return nil, &Error{File: name, Reason: fmt.Sprintf("a second segment numbered %d (the other is %s); move the one that does not belong out of the log directory",
				s.seq, segs[len(segs)-1].name)}
		}
		segs = append(segs, s)
	}
	return segs, nil
}

// recover reads one segment, b as mapped, passing its records to replay and
// the offset reached to progress, and returns it with its size. In the last
// segment, damage that may be a torn tail is returned as fe, for reopenLast
// to repair; anywhere else it is an error.
func (w *WAL) recover(s segment, b []byte, last bool, replay Replay, progress func(off int64)) (_ segment, fe *frame.Error, err error) {
	s.size, err = w.readSegment(b, s, replay, progress)
	switch {
	case errors.As(err, &fe) && !last:
		return s, nil, &Error{File: path.Join(w.dir, s.name), Offset: fe.Offset, Reason: fe.Reason +
			"; this segment is not the last, so this is damage, not a torn write: restore the data directory from a backup"}
	case err != nil && fe == nil: // bad contents in a valid frame: an *Error
		return s, nil, err
	}
	return s, fe, nil
}

// reopenLast opens the last segment, s as mapped in b, for writing. It first
// repairs the torn tail fe, if not nil, and writes the segment's start again
// if that was torn.
func (w *WAL) reopenLast(s segment, b []byte, fe *frame.Error) (segment, error) {
	f, err := w.fs.OpenRW(path.Join(w.dir, s.name))
	if err != nil {
		return s, fmt.Errorf("wal: %w", err)
	}
	end := s.size
	if fe != nil {
		end, err = w.repairTail(f, b, s, fe)
	}
	// A segment starts with its header and the hard state, written and
	// synced together. If either was torn, the segment holds no record:
	// write both again, so that the segment keeps the hard state when the
	// segments before it are deleted.
	if err == nil && end <= headerSize {
		w.opt.Logger.Warn("wal: the start of the last segment was torn; writing its header and the hard state again",
			"file", path.Join(w.dir, s.name))
		err = w.whenSpace(func() (err error) {
			end, err = w.rewriteHeader(f, s)
			return err
		})
	}
	// What the segment holds is durable (settle synced it, and a repair
	// syncs what it changes), so the next write's seal may cover it. Its
	// name may not be, if the process stopped between making the segment
	// and syncing its directory (see create): writes acknowledged here
	// would go with the name at a power loss.
	if err == nil {
		if err = w.fs.SyncDir(w.dir); err != nil {
			err = fmt.Errorf("wal: fsync %s: %w", w.dir, err)
		}
	}
	if err != nil {
		f.Close()
		return s, err
	}
	s.size = end
	w.f, w.off, w.seal = f, end, newSealer(s.seq, s.first, end)
	w.spare.grows = true
	return s, nil
}

// headerSize is the size of a segment's header frame.
var headerSize = int64(frame.Size(len(magic) + 20))

// rewriteHeader writes the header and hard state of a segment that holds no
// record. After a full disk it may be called again, even if its write was
// partly made or its fsync failed: each call writes the same bytes over the
// whole start again, which dirties any page a failed fsync left clean, and
// the segment holds nothing after them (a torn tail was truncated, or it is
// a preallocated segment's zeros). A crash meanwhile leaves a torn start,
// which the next Open writes again.
func (w *WAL) rewriteHeader(f vfs.File, s segment) (int64, error) {
	b, _ := w.segmentStart(s.seq, s.first)
	if _, err := f.WriteAt(b, 0); err != nil {
		return 0, fmt.Errorf("wal: rewriting the header of %s: %w", s.name, err)
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("wal: rewriting the header of %s: %w", s.name, err)
	}
	return int64(len(b)), nil
}

// readSegment passes the records of one segment, b, to replay, and the
// offset of each to progress, and returns the offset after the last one.
// Frames are checked on another goroutine, ahead of replay (frame.Ahead).
// A frame that cannot be read returns a *frame.Error; a valid frame with
// bad contents returns an *Error. b is the
// mapped segment, and the log only ever appends after the records read
// here (a torn tail it truncates holds none), so the records stay as they
// are.
func (w *WAL) readSegment(b []byte, s segment, replay Replay, progress func(off int64)) (int64, error) {
	r := frame.NewAhead(b, progress)
	defer r.Close()
	for i := 0; ; i++ {
		fr := r.Next()
		off, typ, p, err := fr.Offset, fr.Type, fr.Payload, fr.Err
		if err == io.EOF && i > 0 {
			return off, nil
		}
		if err == io.EOF {
			return 0, &frame.Error{Offset: 0, Reason: "empty segment", Torn: true}
		}
		if err != nil {
			return off, err
		}
		if err := w.record(s, i, off, typ, p, replay); err != nil {
			return off, &Error{File: path.Join(w.dir, s.name), Offset: off, Reason: err.Error()}
		}
	}
}

// record checks and replays the i-th frame of segment s, at off, and adds
// an entry to the index (without the lock: no reader has the log yet).
// Errors of its own say what the operator can do; replay's are returned as
// they are.
func (w *WAL) record(s segment, i int, off int64, typ byte, p []byte, replay Replay) error {
	switch {
	case i == 0 && typ != typeHeader:
		return badFrame(errors.New("the segment does not start with a header"))
	case i == 0:
		return badFrame(w.checkHeader(p, s))
	case w.multi != nil && typ != typeSeal:
		return w.multi.record(s, off, typ, p)
	case typ == typeEntry:
		e, err := decodeEntry(p)
		if err != nil {
			return badFrame(err)
		}
		// A raft truncation may rewrite entries from before the segment's
		// first index: only a gap is damage, and only one in entries that
		// the snapshot does not hold.
		if e.Index > w.next() {
			return fmt.Errorf("entry %d follows entry %d in a segment starting at %d: entries are missing; restore the data directory from a backup",
				e.Index, w.last, s.first)
		}
		if off >= maxIndexed {
			return fmt.Errorf("an entry at offset %d, in a segment longer than this build reads back (%d bytes): move the log aside to start from the snapshot alone, or run the build that wrote it",
				off, int64(maxIndexed))
		}
		w.last = e.Index
		w.idx.add(s.seq, s.name, e.Index, e.Term, off, off+int64(frame.Size(len(p))))
		return replay.Entry(e)
	case typ == typeHardState:
		hs, err := decodeHardState(p)
		if err != nil {
			return badFrame(err)
		}
		w.hs = hs
		return replay.HardState(hs)
	case typ == typeRestart:
		return w.restartRecord(s, p, replay)
	case typ == typeSeal:
		if _, _, ok := decodeSeal(p); !ok {
			return badFrame(fmt.Errorf("a seal of %d bytes, not %d", len(p), sealSize))
		}
		return nil // only a torn tail's repair reads seals
	}
	return badFrame(fmt.Errorf("unknown frame type %d", typ))
}

// badFrame adds to err, if not nil, what the operator can do about a valid
// frame with bad contents.
func badFrame(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w; the log is damaged, or was written by another version of Flint: run that version, or restore the data directory from a backup", err)
}

// checkHeader checks the header of segment s, whose version must be one
// that this log reads: 2 or 3 for a log of one group, 4 for a shared log.
func (w *WAL) checkHeader(p []byte, s segment) error {
	if len(p) != len(magic)+20 || string(p[:len(magic)]) != magic {
		return errors.New("not a Flint log segment (bad magic)")
	}
	v := binary.LittleEndian.Uint32(p[len(magic):])
	switch {
	case w.multi == nil && v == sharedVersion:
		return fmt.Errorf("log format version %d, a shared log of many groups, where a log of one group was expected", v)
	case w.multi != nil && v != sharedVersion:
		return fmt.Errorf("log format version %d, a log of one group, where a shared log of many groups (version %d) was expected", v, sharedVersion)
	case w.multi == nil && (v < minVersion || v > version):
		return fmt.Errorf("log format version %d, this build reads versions %d to %d", v, minVersion, version)
	}
	seq, first := binary.LittleEndian.Uint64(p[len(magic)+4:]), binary.LittleEndian.Uint64(p[len(magic)+12:])
	if seq != s.seq || first != s.first {
		return fmt.Errorf("header says segment %d starting at %d, but the file name says %d starting at %d", seq, first, s.seq, s.first)
	}
	return nil
}

// repairTail handles damage found at fe in the last segment. If no valid
// frame follows the damage, the segment ends in a torn write: it is
// truncated there and the loss logged. Otherwise the damage is corruption.
// b is the segment's content as mapped: nothing past fe may be read once
// the file is truncated.
func (w *WAL) repairTail(f vfs.File, b []byte, s segment, fe *frame.Error) (int64, error) {
	name := path.Join(w.dir, s.name)
	if at, ok := sealedAfter(b, s, fe.Offset); ok {
		return 0, &Error{File: name, Offset: fe.Offset, Reason: fmt.Sprintf(
			"%s, and the write sealed at offset %d was made once it was durable, so this is damage, not a torn write: restore the data directory from a backup",
			fe.Reason, at)}
	}
	torn := len(bytes.TrimRight(b[fe.Offset:], "\x00")) // the zeros of a preallocated segment are no loss
	if err := f.Truncate(fe.Offset); err != nil {
		return 0, fmt.Errorf("wal: truncating torn tail of %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("wal: truncating torn tail of %s: %w", name, err)
	}
	w.opt.Logger.Warn("wal: truncated a torn write at the end of the log", "file", name,
		"offset", fe.Offset, "bytes", torn, "reason", fe.Reason)
	return fe.Offset, nil
}

func decodeEntry(p []byte) (raftpb.Entry, error) {
	var e raftpb.Entry
	var ok bool
	if e.Term, p, ok = uvarint(p); !ok {
		return e, errors.New("bad entry term")
	}
	if e.Index, p, ok = uvarint(p); !ok || len(p) < 1 {
		return e, errors.New("bad entry index")
	}
	e.Type, e.Data = raftpb.EntryType(p[0]), p[1:]
	return e, nil
}

func decodeHardState(p []byte) (raftpb.HardState, error) {
	var hs raftpb.HardState
	var ok1, ok2, ok3 bool
	hs.Term, p, ok1 = uvarint(p)
	hs.Vote, p, ok2 = uvarint(p)
	hs.Commit, p, ok3 = uvarint(p)
	if !ok1 || !ok2 || !ok3 || len(p) != 0 {
		return hs, errors.New("bad hard state record")
	}
	return hs, nil
}

func uvarint(p []byte) (uint64, []byte, bool) {
	v, n := binary.Uvarint(p)
	if n <= 0 {
		return 0, p, false
	}
	return v, p[n:], true
}

// restartRecord reads a restart record (see WAL.Restart) in segment s:
// the log goes on after its index, which the snapshot that Open was given
// must hold, since the entries before it are gone.
func (w *WAL) restartRecord(s segment, p []byte, replay Replay) error {
	index, rest, ok := uvarint(p)
	if !ok || len(rest) != 0 {
		return badFrame(errors.New("a malformed restart record"))
	}
	if index > w.after {
		return fmt.Errorf("the log restarts after entry %d, a snapshot installed from the leader, but the newest snapshot ends at %d: "+
			"that snapshot is missing; restore the data directory from a backup", index, w.after)
	}
	w.last, w.restartSeq = index, s.seq
	w.idx.reset(index + 1)
	if replay.Restart != nil {
		return replay.Restart(index)
	}
	return nil
}

// dropBeforeRestart deletes the segments before the last one that holds a
// restart record, which Restart deletes once it is durable: a crash may
// have left them.
func (w *WAL) dropBeforeRestart() error {
	n := 0
	for n < len(w.segs) && w.segs[n].seq < w.restartSeq {
		n++
	}
	if n == 0 {
		return nil
	}
	w.opt.Logger.Warn("wal: deleting the segments before a restart of the log (a snapshot installed from the leader)",
		"dir", w.dir, "first", w.segs[0].name, "count", n)
	removed, err := w.removeSegments(w.segs[:n])
	for _, s := range w.segs[:removed] {
		w.size -= s.size
	}
	w.segs = w.segs[removed:]
	return err
}
