package multiraft

import (
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"sync"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/snap"
	"github.com/flintkv/flint/internal/vfs"
	"github.com/flintkv/flint/internal/wal"
)

// snapDir is group id's snapshot directory.
func (h *Host) snapDir(id uint64) string {
	return path.Join(h.cfg.SnapDir, fmt.Sprintf("%016x", id))
}

// restore returns the metadata of the snapshot that group id starts from,
// and the group's log after it. A group that takes snapshots (sm is a
// Snapshotter, and Config.SnapDir is set) starts from the newest of its
// snapshots that its log goes on from, which sm is restored from; without
// one, or if the group takes none, sm stays as it is, the log starts from
// its first entry and the configuration is members. A snapshot is of committed entries, so any one the log goes on
// from will do (one sent by a leader and not yet taken by raft among
// them: the log's entries after it are checked by raft as any are). It
// returns the group's roster as of the snapshot too.
func (h *Host) restore(id uint64, members []uint64, sm StateMachine) (raftpb.SnapshotMetadata, *roster, *wal.Group, error) {
	none := raftpb.SnapshotMetadata{ConfState: raftpb.ConfState{Voters: members}}
	ss, ok := sm.(Snapshotter)
	if !ok || h.cfg.SnapDir == "" {
		lg, err := h.cfg.Log.Group(id, 0)
		return none, emptyRoster, lg, err
	}
	if h.cfg.FS == nil {
		return none, nil, nil, fmt.Errorf("multiraft: group %d takes snapshots in %s, and Config.FS is nil", id, h.cfg.SnapDir)
	}
	dir := h.snapDir(id)
	if err := vfs.MkdirAll(h.cfg.FS, dir); err != nil {
		return none, nil, nil, fmt.Errorf("multiraft: %w", err)
	}
	// Only the .tmp files that a crash left behind.
	if err := snap.Prune(h.cfg.FS, dir, math.MaxInt); err != nil {
		return none, nil, nil, err
	}
	infos, err := snap.List(h.cfg.FS, dir)
	if err != nil {
		return none, nil, nil, err
	}
	for i := len(infos) - 1; i >= 0; i-- {
		lg, err := h.cfg.Log.Group(id, infos[i].Index)
		if err != nil {
			continue
		}
		meta, err := snap.ReadStream(h.cfg.FS, path.Join(dir, infos[i].Name), ss.Restore)
		var r *roster
		if err == nil {
			r, err = rosterOf(meta.Sections)
		}
		if err != nil {
			return none, nil, nil, fmt.Errorf("multiraft: group %d: restoring snapshot %s: %w", id, infos[i].Name, err)
		}
		return raftpb.SnapshotMetadata{Index: meta.Index, Term: meta.Term, ConfState: meta.Conf}, r, lg, nil
	}
	lg, err := h.cfg.Log.Group(id, 0)
	return none, emptyRoster, lg, err
}

// snapJob is a snapshot of a group's state for snapLoop to write.
type snapJob struct {
	g     *group
	meta  snap.Meta
	gen   uint64 // the group's snapGen when the state was captured
	write func(io.Writer) error
}

// snapDone is how writing a group's snapshot ended.
type snapDone struct {
	meta snap.Meta
	err  error
}

// snapSent is how a snapshot stream to member to ended.
type snapSent struct {
	to uint64
	ok bool
}

// errSuperseded: a snapshot of the state before one installed from the
// leader is not written.
var errSuperseded = errors.New("multiraft: a snapshot from the leader was installed since")

// snapQueue is the snapshots waiting for snapLoop, at most one per group.
type snapQueue struct {
	mu     sync.Mutex
	cond   *sync.Cond
	jobs   []snapJob
	closed bool
}

func (q *snapQueue) init() { q.cond = sync.NewCond(&q.mu) }

func (q *snapQueue) submit(j snapJob) {
	q.mu.Lock()
	q.jobs = append(q.jobs, j)
	q.mu.Unlock()
	q.cond.Signal()
}

// take waits for a snapshot to write, and reports false once the queue is
// closed.
func (q *snapQueue) take() (snapJob, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.jobs) == 0 && !q.closed {
		q.cond.Wait()
	}
	if q.closed {
		return snapJob{}, false
	}
	j := q.jobs[0]
	q.jobs[0] = snapJob{}
	q.jobs = q.jobs[1:]
	return j, true
}

func (q *snapQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Broadcast()
}

// snapLoop writes the groups' snapshots, one at a time, and hands each
// group how its snapshot ended.
func (h *Host) snapLoop() {
	defer h.wg.Done()
	for {
		j, ok := h.snaps.take()
		if !ok {
			return
		}
		err := h.writeSnapshot(j)
		j.g.snapshotDone(snapDone{j.meta, err})
		h.queue.push(j.g)
	}
}

// writeSnapshot writes j's snapshot file, unless a snapshot from the
// leader was installed since its state was captured.
func (h *Host) writeSnapshot(j snapJob) error {
	g := j.g
	g.snapFiles.Lock()
	defer g.snapFiles.Unlock()
	if g.snapGen != j.gen {
		return errSuperseded
	}
	_, _, err := snap.WriteStream(h.cfg.FS, h.snapDir(g.id), j.meta, j.write)
	return err
}

func (g *group) snapshotDone(d snapDone) {
	g.in.Lock()
	defer g.in.Unlock()
	g.in.snapsDone = append(g.in.snapsDone, d)
}

func (g *group) snapshotSent(to uint64, ok bool) {
	g.in.Lock()
	defer g.in.Unlock()
	g.in.snapsSent = append(g.in.snapsSent, snapSent{to, ok})
}

// maybeSnapshot captures g's state for a snapshot at its applied index if
// it takes snapshots, none is being written, and it applied
// Config.SnapshotEntries entries since its last snapshot or the log asked
// it to (it holds up the deletion of the oldest segment). snapLoop writes
// it. g.mu is held: this is the group's apply goroutine.
func (h *Host) maybeSnapshot(g *group) {
	if g.snapper == nil || g.snapping || g.applied <= g.snapIndex ||
		!g.askSnap.Load() && g.applied-g.snapIndex < uint64(h.cfg.SnapshotEntries) {
		return
	}
	write, err := g.snapper.Snapshot()
	if err != nil {
		h.cfg.Logger.Error("multiraft: a snapshot failed; the log keeps every entry, and the next snapshot tries again", "group", g.id, "index", g.applied, "err", err)
		return
	}
	g.askSnap.Store(false)
	g.snapping = true
	meta := snap.Meta{Index: g.applied, Term: g.appliedTerm, Conf: g.conf, Sections: g.roster.Load().sections()}
	h.snaps.submit(snapJob{g: g, meta: meta, gen: g.snapGen, write: write})
}

// snapshotWritten takes the end of a snapshot's write: once durable, it
// is the snapshot raft's storage holds and sends, raft's storage and the
// log are compacted to it, and older snapshot files go. g.mu is held.
func (h *Host) snapshotWritten(g *group, d snapDone) {
	g.snapping = false
	switch {
	case errors.Is(d.err, errSuperseded):
		return
	case d.err != nil:
		h.cfg.Logger.Error("multiraft: writing a snapshot failed; the log keeps every entry, and the next snapshot tries again", "group", g.id, "index", d.meta.Index, "err", d.err)
		return
	case d.meta.Index <= g.snapIndex:
		h.release(g) // one installed from the leader overtook it
		return
	}
	cs := d.meta.Conf
	// raft's storage may hold a newer snapshot already: one from the
	// leader, whose Ready is being written.
	if _, err := g.storage.CreateSnapshot(d.meta.Index, &cs); err != nil && !errors.Is(err, raft.ErrSnapOutOfDate) {
		h.cfg.Logger.Error("multiraft: recording a snapshot", "group", g.id, "index", d.meta.Index, "err", err)
		return
	}
	if err := g.storage.Compact(d.meta.Index); err != nil && !errors.Is(err, raft.ErrCompacted) {
		h.cfg.Logger.Error("multiraft: compacting raft's log", "group", g.id, "index", d.meta.Index, "err", err)
		return
	}
	g.snapIndex = d.meta.Index
	h.release(g)
}

// release lets the log delete g's entries up to its newest snapshot, and
// deletes its older snapshot files. Newer ones, sent by a leader and not
// taken by raft, stay until a snapshot passes them. g.mu is held.
func (h *Host) release(g *group) {
	if err := h.cfg.Log.ReleaseTo(g.id, g.snapIndex); err != nil {
		h.cfg.Logger.Error("multiraft: releasing the log", "group", g.id, "index", g.snapIndex, "err", err)
	}
	dir := h.snapDir(g.id)
	infos, err := snap.List(h.cfg.FS, dir)
	for i := 0; err == nil && i < len(infos) && infos[i].Index < g.snapIndex; i++ {
		err = h.cfg.FS.Remove(path.Join(dir, infos[i].Name))
	}
	if err != nil {
		h.cfg.Logger.Error("multiraft: deleting old snapshots", "group", g.id, "err", err)
	}
}

// snapFile returns the name of g's snapshot file at index and term.
func (h *Host) snapFile(g *group, index, term uint64) (string, error) {
	infos, err := snap.List(h.cfg.FS, h.snapDir(g.id))
	if err != nil {
		return "", err
	}
	for _, in := range infos {
		if in.Index == index && in.Term == term {
			return in.Name, nil
		}
	}
	return "", fmt.Errorf("multiraft: group %d has no snapshot at index %d, term %d", g.id, index, term)
}

// sendSnapshot streams the snapshot that MsgSnap m names to its member.
// g.mu is held.
func (h *Host) sendSnapshot(g *group, m raftpb.Message) {
	md := m.Snapshot.Metadata
	if !isMember(md.ConfState, m.To) {
		// A member added since: raft takes no snapshot of a configuration
		// without it. It gets the next one, which the change asked for.
		g.rn.ReportSnapshot(m.To, raft.SnapshotFailure)
		return
	}
	name, err := h.snapFile(g, md.Index, md.Term)
	var body io.ReadCloser
	var size int64
	if err == nil {
		body, size, err = snap.OpenFile(h.cfg.FS, h.snapDir(g.id), name)
	}
	if err != nil {
		h.cfg.Logger.Error("multiraft: cannot send a snapshot", "group", g.id, "to", m.To, "err", err)
		g.rn.ReportSnapshot(m.To, raft.SnapshotFailure)
		return
	}
	h.cfg.Sender.SendSnapshot(m.To, g.id, m, body, size)
}

// ReceiveSnapshot implements transport.Handler: it makes the snapshot that
// body streams durable, then gives its MsgSnap to raft, which so only ever
// takes a snapshot whose file is durable.
func (h *Host) ReceiveSnapshot(from, group uint64, m raftpb.Message, body io.Reader) error {
	g := h.group(group)
	switch {
	case g == nil:
		return ErrNoGroup
	case g.snapper == nil:
		return fmt.Errorf("multiraft: group %d takes no snapshots on node %d", group, h.cfg.Node)
	case m.Type != raftpb.MsgSnap || m.From != from || m.To != h.cfg.Node || m.Snapshot == nil || raft.IsEmptySnap(*m.Snapshot):
		return fmt.Errorf("multiraft: group %d was sent something other than a snapshot for node %d", group, h.cfg.Node)
	}
	md := m.Snapshot.Metadata
	g.snapFiles.Lock()
	_, err := snap.Install(h.cfg.FS, h.snapDir(group), snap.Info{Index: md.Index, Term: md.Term}, body)
	g.snapFiles.Unlock()
	if err != nil {
		return err
	}
	if g.receive([]raftpb.Message{m}) {
		h.queue.push(g)
	}
	return nil
}

// SnapshotDone implements transport.Handler: raft learns how the stream
// ended.
func (h *Host) SnapshotDone(to, group uint64, err error) {
	if g := h.group(group); g != nil {
		g.snapshotSent(to, err == nil)
		h.queue.push(g)
	}
}

// installSnapshot makes g's state the snapshot md that raft took from its
// leader, whose file, then the log's restart after it, are durable. It
// waits for a snapshot being written, so that Restore never runs with a
// write, and makes those not yet started moot. g.mu is held.
func (h *Host) installSnapshot(g *group, md raftpb.SnapshotMetadata) {
	name, err := h.snapFile(g, md.Index, md.Term)
	g.snapFiles.Lock()
	g.snapGen++
	var meta snap.Meta
	var r *roster
	if err == nil {
		meta, err = snap.ReadStream(h.cfg.FS, path.Join(h.snapDir(g.id), name), g.snapper.Restore)
	}
	if err == nil {
		r, err = rosterOf(meta.Sections)
	}
	g.snapFiles.Unlock()
	if err != nil {
		// The file was durable and checked before raft took it: this
		// is damage since, or a bug, and the state is no longer known.
		panic(fmt.Sprintf("multiraft: group %d: installing the snapshot at %d: %v", g.id, md.Index, err))
	}
	g.applied, g.appliedTerm, g.snapIndex, g.conf = md.Index, md.Term, md.Index, md.ConfState
	h.setRoster(g, r)
	h.addPeers(md.ConfState)
	h.release(g)
}
