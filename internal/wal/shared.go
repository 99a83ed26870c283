package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/frame"
	"github.com/flintkv/flint/internal/vfs"
)

// Frame types of format version 4, the shared log's, besides the header
// and the seal.
const (
	typeGroupEntry     = 6
	typeGroupHardState = 7
	typeGroupRestart   = 8
)

// sharedVersion is the format of a shared log's segments.
const sharedVersion = 4

// maxGroupEntryData is the most data a group entry's record holds: an
// entry's, less the group's tag.
const maxGroupEntryData = maxEntryData - binary.MaxVarintLen64

// Shared is an open shared log: the logs of many raft groups, one node's, in
// one sequence of segments, so that a write to many groups costs one write
// and one fsync (see the package doc, "The shared log").
//
// Save (or Append and Sync) must be called by one goroutine at a time, the
// node's log writer. Everything else may be called from any goroutine, at
// any time: ReleaseTo calls are serialized, and Group's readers are those
// of a WAL.
type Shared struct {
	w     *WAL
	relMu sync.Mutex // serializes ReleaseTo
	pos   []int      // offsets in w.buf of the entries' frames, during Append
}

// groups is the state of a shared log's groups (WAL.multi), guarded by
// WAL.mu (Open's replay runs before any reader has the log).
type groups struct {
	logs map[uint64]*groupLog
	// holds[seq][g] is the index of the last entry of group g written in
	// segment seq (the largest, if a rewrite wrote a smaller one after
	// it), for every group with entries there since its last restart.
	// Invariant: a segment may be deleted once every group g in its
	// holds has let go of the entries up to holds[seq][g] (released),
	// and every segment before it is deleted.
	holds map[uint64]map[uint64]uint64
}

// groupLog is one group's log in a shared log.
type groupLog struct {
	idx index // its entries, as WAL.idx for a log of one group
	hs  raftpb.HardState
	// released is the index of the group's newest durable snapshot, as
	// Group and ReleaseTo were told: its entries up to there may go.
	released uint64
	// restart is the index after which a restart record read by Open
	// made the group's log start over, or 0.
	restart uint64
}

func newGroups() *groups {
	return &groups{logs: map[uint64]*groupLog{}, holds: map[uint64]map[uint64]uint64{}}
}

// get returns group g's log, adding an empty one if there is none.
func (gs *groups) get(g uint64) *groupLog {
	l, ok := gs.logs[g]
	if !ok {
		l = &groupLog{}
		gs.logs[g] = l
	}
	return l
}

// hold records that segment seq holds entry i of group g.
func (gs *groups) hold(seq, g, i uint64) {
	h, ok := gs.holds[seq]
	if !ok {
		h = map[uint64]uint64{}
		gs.holds[seq] = h
	}
	h[g] = max(h[g], i)
}

// add records entry e of group g, whose frame is at off in segment s and
// ends by end.
func (gs *groups) add(s segment, g uint64, e *raftpb.Entry, off, end int64) {
	gs.get(g).idx.add(s.seq, s.name, e.Index, e.Term, off, end)
	gs.hold(s.seq, g, e.Index)
}

// restart makes group g's log start over after index: the entries it
// held, in whatever segment, no longer keep a segment from deletion.
func (gs *groups) restart(g, index uint64) {
	gs.get(g).idx.reset(index + 1)
	for _, h := range gs.holds {
		delete(h, g)
	}
}

// appendHardStates appends the hard state of every group that has one, in
// the order of their ids, as a segment's start holds them.
func (gs *groups) appendHardStates(b []byte) []byte {
	ids := make([]uint64, 0, len(gs.logs))
	for g, l := range gs.logs {
		if !raft.IsEmptyHardState(l.hs) {
			ids = append(ids, g)
		}
	}
	slices.Sort(ids)
	for _, g := range ids {
		b = appendGroupHardState(b, g, gs.logs[g].hs)
	}
	return b
}

// record replays a frame of segment s at off, past its header.
func (gs *groups) record(s segment, off int64, typ byte, p []byte) error {
	switch typ {
	case typeGroupEntry:
		g, e, err := decodeGroupEntry(p)
		if err != nil {
			return badFrame(err)
		}
		if off >= maxIndexed {
			return fmt.Errorf("an entry at offset %d, in a segment longer than this build reads back (%d bytes)", off, int64(maxIndexed))
		}
		gs.add(s, g, &e, off, off+int64(frame.Size(len(p))))
		return nil
	case typeGroupHardState:
		g, rest, ok := uvarint(p)
		if !ok {
			return badFrame(errors.New("a hard state record without its group"))
		}
		hs, err := decodeHardState(rest)
		if err != nil {
			return badFrame(err)
		}
		gs.get(g).hs = hs
		return nil
	case typeGroupRestart:
		g, index, err := decodeGroupRestart(p)
		if err != nil {
			return badFrame(err)
		}
		gs.restart(g, index)
		gs.get(g).restart = index
		return nil
	}
	return badFrame(fmt.Errorf("frame type %d in a shared log", typ))
}

// OpenShared opens the shared log in dir, creating dir and a first segment
// if there is none, and reads every group's log into memory: the offsets
// and terms of its entries, and its hard state. Group then gives a group's
// log to its raft storage, given the group's snapshot. A shared log always
// fsyncs its writes: Options.NoSync is refused. Damage is reported as an
// *Error; a torn tail is truncated, as in a log of one group.
func OpenShared(fs vfs.FS, dir string, opt Options) (_ *Shared, err error) {
	if opt.NoSync {
		return nil, errors.New("wal: a shared log fsyncs every write: NoSync is not supported")
	}
	w := &WAL{fs: fs, dir: dir, opt: opt, multi: newGroups()}
	w.withDefaults()
	defer w.abandonIf(&err)
	segs, err := w.prepare()
	if err != nil {
		return nil, err
	}
	if err := checkConsecutive(segs); err != nil {
		return nil, err
	}
	if len(segs) == 0 {
		err = w.whenSpace(func() error { return w.start(1, 0) })
	} else if err = w.settle(segs[len(segs)-1]); err == nil {
		err = w.replay(segs, Replay{})
	}
	if err != nil {
		return nil, err
	}
	w.startSpare()
	return &Shared{w: w}, nil
}

// checkConsecutive returns an error if a segment is missing between the
// first and the last of segs: a shared log deletes only its oldest
// segments, and never leaves a gap.
func checkConsecutive(segs []segment) error {
	for i := 1; i < len(segs); i++ {
		if segs[i].seq != segs[i-1].seq+1 {
			return &Error{File: segs[i].name, Reason: fmt.Sprintf("segments %d to %d are missing before it; restore them, or the data directory, from a backup",
				segs[i-1].seq+1, segs[i].seq-1)}
		}
	}
	return nil
}

// Write is what one group saves in a write to a shared log, in this order:
// if Restart is not 0, its log starts over after Restart, the index of a
// snapshot installed from its leader, which must be durable first (see
// WAL.Restart); then its Entries; then its HardState, unless empty or the
// same as the last saved.
type Write struct {
	Group     uint64
	Restart   uint64
	Entries   []raftpb.Entry
	HardState raftpb.HardState
}

// Save appends ws and makes them durable, with one write and one fsync
// for them all. Its errors are WAL.Save's: a full disk leaves the log as it
// was, and Save may be called again; any other error is permanent.
func (sh *Shared) Save(ws []Write) error {
	if err := sh.Append(ws); err != nil {
		return err
	}
	return sh.Sync()
}

// Append is Save without the fsync.
func (sh *Shared) Append(ws []Write) error {
	w := sh.w
	if w.failed != nil {
		return w.failed
	}
	if err := checkWrites(ws); err != nil {
		return err
	}
	w.buf, sh.pos = sh.encode(w.buf[:0], sh.pos[:0], ws)
	if len(w.buf) == 0 {
		return nil
	}
	start, err := w.writeBuf(nil)
	if err != nil {
		return err
	}
	sh.index(ws, start)
	if cap(w.buf) > 16<<20 {
		w.buf = nil
	}
	return nil
}

// checkWrites refuses a write of an entry too large for a record.
func checkWrites(ws []Write) error {
	for _, x := range ws {
		for i := range x.Entries {
			if n := len(x.Entries[i].Data); n > maxGroupEntryData {
				return fmt.Errorf("wal: entry %d of group %d holds %d bytes, more than a log record can (%d): it is not written",
					x.Entries[i].Index, x.Group, n, maxGroupEntryData)
			}
		}
	}
	return nil
}

// encode appends the frames of ws to b, and the offset of each entry's
// frame to pos.
func (sh *Shared) encode(b []byte, pos []int, ws []Write) ([]byte, []int) {
	sh.w.mu.Lock()
	defer sh.w.mu.Unlock()
	for _, x := range ws {
		if x.Restart != 0 {
			b = frame.Append(b, typeGroupRestart, binary.AppendUvarint(binary.AppendUvarint(nil, x.Group), x.Restart))
		}
		for i := range x.Entries {
			pos = append(pos, len(b))
			b = appendGroupEntry(b, x.Group, &x.Entries[i])
		}
		if l := sh.w.multi.logs[x.Group]; !raft.IsEmptyHardState(x.HardState) && (l == nil || l.hs != x.HardState) {
			b = appendGroupHardState(b, x.Group, x.HardState)
		}
	}
	return b, pos
}

// index adds ws, just written at start in the last segment (their
// entries' frames at sh.pos in the write), to the groups' logs.
func (sh *Shared) index(ws []Write, start int64) {
	w := sh.w
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.segs[len(w.segs)-1]
	k := 0
	for _, x := range ws {
		if x.Restart != 0 {
			w.multi.restart(x.Group, x.Restart)
		}
		for i := range x.Entries {
			w.multi.add(s, x.Group, &x.Entries[i], start+int64(sh.pos[k]), w.off)
			k++
		}
		if !raft.IsEmptyHardState(x.HardState) {
			w.multi.get(x.Group).hs = x.HardState
		}
	}
}

// Sync makes everything appended durable. A failure is permanent.
func (sh *Shared) Sync() error { return sh.w.Sync() }

// ReleaseTo records that group has a durable snapshot at index, so that
// its entries up to there may go, and deletes the oldest segments that no
// group holds any more (see the package doc). The segment being written is
// never deleted. As in WAL.ReleaseTo, a segment is forgotten only once it
// is gone, and its entries stop being served before.
func (sh *Shared) ReleaseTo(group, index uint64) error {
	sh.relMu.Lock()
	defer sh.relMu.Unlock()
	w := sh.w
	w.mu.Lock()
	l := w.multi.get(group)
	l.released = max(l.released, index)
	n := 0
	for n+1 < len(w.segs) && w.multi.free(w.segs[n].seq) {
		n++
	}
	gone := append([]segment(nil), w.segs[:n]...)
	for _, s := range gone {
		for g := range w.multi.holds[s.seq] {
			w.multi.logs[g].idx.release(s.seq)
		}
		delete(w.multi.holds, s.seq)
	}
	w.mu.Unlock()
	return w.deleteSegments(gone)
}

// free reports whether every group has let go of its entries in segment
// seq.
func (gs *groups) free(seq uint64) bool {
	for g, last := range gs.holds[seq] {
		if gs.logs[g].released < last {
			return false
		}
	}
	return true
}

// Holders returns the groups, in order, whose entries keep the oldest
// segment from deletion, if there is more than one segment: those that
// the node should ask to snapshot when the log grows too long, as each
// snapshot then lets ReleaseTo delete it.
func (sh *Shared) Holders() []uint64 {
	w := sh.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.segs) < 2 {
		return nil
	}
	var ids []uint64
	for g, last := range w.multi.holds[w.segs[0].seq] {
		if w.multi.logs[g].released < last {
			ids = append(ids, g)
		}
	}
	slices.Sort(ids)
	return ids
}

// Metrics returns the log's metrics (LastIndex is not kept: each group
// has its own).
func (sh *Shared) Metrics() Metrics { return sh.w.Metrics() }

// Close closes the segment being written.
func (sh *Shared) Close() error { return sh.w.Close() }

// Group returns the log of group id, whose newest durable snapshot is at
// after (0 if none): it must hold every entry from after+1 to its last,
// and its entries up to after may be deleted. A group the log has never
// seen has an empty log that goes on at after+1. An error says what is
// missing, as Open's do.
func (sh *Shared) Group(id, after uint64) (*Group, error) {
	w := sh.w
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.multi.get(id)
	if err := l.check(id, after); err != nil {
		return nil, &Error{File: w.dir, Reason: err.Error()}
	}
	if l.idx.first == l.idx.next {
		l.idx.reset(after + 1)
	}
	l.released = max(l.released, after)
	return &Group{w: w, v: view{x: &l.idx, shared: true, group: id}, log: l}, nil
}

// check returns an error unless the log holds every entry after a
// snapshot at after.
func (l *groupLog) check(id, after uint64) error {
	x := &l.idx
	switch {
	case l.restart > after:
		return fmt.Errorf("group %d's log restarts after entry %d, a snapshot installed from its leader, but its newest snapshot ends at %d: "+
			"that snapshot is missing; restore the data directory from a backup", id, l.restart, after)
	case x.first == x.next && x.next > after+1:
		return fmt.Errorf("group %d's entries up to %d were released, but its snapshot ends at %d: restore the data directory from a backup", id, x.next-1, after)
	case x.first != x.next && x.first > after+1:
		return fmt.Errorf("group %d's log starts at entry %d but its snapshot ends at %d: entries %d to %d are missing; restore the data directory from a backup",
			id, x.first, after, after+1, x.first-1)
	case x.first != x.next && x.next <= after:
		return fmt.Errorf("group %d's log ends at entry %d, before its snapshot's %d: its tail is missing; restore the data directory from a backup", id, x.next-1, after)
	}
	return nil
}

// Group is one group's log in a shared log: what its raft storage reads
// (see package raftlog). Its methods are WAL's, and may be called from any
// goroutine.
type Group struct {
	w   *WAL
	v   view
	log *groupLog
}

// FirstIndex is WAL.FirstIndex for the group's log.
func (g *Group) FirstIndex() uint64 { return g.w.firstOf(g.v) }

// LastIndex is WAL.LastIndex for the group's log.
func (g *Group) LastIndex() uint64 { return g.w.lastOf(g.v) }

// Term is WAL.Term for the group's log.
func (g *Group) Term(i uint64) (uint64, error) { return g.w.termOf(g.v, i) }

// Entries is WAL.Entries for the group's log.
func (g *Group) Entries(lo, hi, maxSize uint64) ([]raftpb.Entry, error) {
	return g.w.entriesOf(g.v, lo, hi, maxSize)
}

// HardState returns the group's hard state last saved, or read by Open.
func (g *Group) HardState() raftpb.HardState {
	g.w.mu.Lock()
	defer g.w.mu.Unlock()
	return g.log.hs
}

func appendGroupEntry(dst []byte, g uint64, e *raftpb.Entry) []byte {
	dst, start := frame.Begin(dst, typeGroupEntry)
	dst = binary.AppendUvarint(dst, g)
	return frame.Finish(appendEntryBody(dst, e), start)
}

func appendGroupHardState(dst []byte, g uint64, hs raftpb.HardState) []byte {
	dst, start := frame.Begin(dst, typeGroupHardState)
	dst = binary.AppendUvarint(dst, g)
	return frame.Finish(appendHardStateBody(dst, hs), start)
}

func decodeGroupEntry(p []byte) (uint64, raftpb.Entry, error) {
	g, rest, ok := uvarint(p)
	if !ok {
		return 0, raftpb.Entry{}, errors.New("an entry record without its group")
	}
	e, err := decodeEntry(rest)
	return g, e, err
}

func decodeGroupRestart(p []byte) (g, index uint64, err error) {
	g, p, ok1 := uvarint(p)
	index, p, ok2 := uvarint(p)
	if !ok1 || !ok2 || index == 0 || len(p) != 0 {
		return 0, 0, errors.New("a malformed restart record")
	}
	return g, index, nil
}
