package multiraft

import (
	"errors"
	"fmt"
	"io"
	"path"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/snap"
	"github.com/flintkv/flint/internal/vfs"
	"github.com/flintkv/flint/internal/wal"
)

// stateSection is the section of a group's snapshot file that holds what
// its StateMachine.Snapshot returned.
const stateSection = "state"

// keepSnapshots is how many snapshot files each group keeps: the newest
// may be ahead of the log after a crash while it installed a leader's
// snapshot (see restore), and the one before it is then the one to start
// from.
const keepSnapshots = 2

// snapDir is group id's snapshot directory.
func (h *Host) snapDir(id uint64) string {
	return path.Join(h.cfg.SnapDir, fmt.Sprintf("%016x", id))
}

// restore finds the newest snapshot of group id that its log goes on
// from, restores sm from it and returns its metadata and the group's log;
// without one, sm stays as it is and the log starts from its first entry.
// A snapshot that a leader sent, once durable, is newer than the log until
// the log's restart after it is saved: a crash between the two leaves the
// snapshot before it to start from.
func (h *Host) restore(id uint64, members []uint64, sm StateMachine) (raftpb.SnapshotMetadata, *wal.Group, error) {
	dir := h.snapDir(id)
	if err := vfs.MkdirAll(h.cfg.FS, dir); err != nil {
		return raftpb.SnapshotMetadata{}, nil, fmt.Errorf("multiraft: %w", err)
	}
	infos, err := snap.List(h.cfg.FS, dir)
	if err != nil {
		return raftpb.SnapshotMetadata{}, nil, err
	}
	for i := len(infos) - 1; i >= 0; i-- {
		lg, err := h.cfg.Log.Group(id, infos[i].Index)
		if err != nil {
			continue
		}
		meta, err := snap.Verify(h.cfg.FS, path.Join(dir, infos[i].Name))
		if err != nil {
			return raftpb.SnapshotMetadata{}, nil, err
		}
		if err := sm.Restore(sectionData(meta)); err != nil {
			return raftpb.SnapshotMetadata{}, nil, fmt.Errorf("multiraft: group %d: restoring snapshot %s: %w", id, infos[i].Name, err)
		}
		return raftpb.SnapshotMetadata{Index: meta.Index, Term: meta.Term, ConfState: meta.Conf}, lg, nil
	}
	lg, err := h.cfg.Log.Group(id, 0)
	return raftpb.SnapshotMetadata{ConfState: raftpb.ConfState{Voters: members}}, lg, err
}

// sectionData returns the state section of a snapshot's meta, or nil.
func sectionData(meta snap.Meta) []byte {
	for _, s := range meta.Sections {
		if s.Name == stateSection {
			return s.Data
		}
	}
	return nil
}

func noPairs(func(string, []byte) bool) {}

// maybeSnapshot snapshots g at its applied index if it applied
// Config.SnapshotEntries entries since its last snapshot, or if the log
// asked it to (it holds up the deletion of the oldest segment): it writes
// the snapshot file, compacts raft's storage and releases the group's
// entries in the log. A failure is logged, and tried again later. g.mu is
// held.
func (h *Host) maybeSnapshot(g *group) {
	asked := g.askSnap.Load()
	if g.applied <= g.snapIndex || !asked && g.applied-g.snapIndex < uint64(h.cfg.SnapshotEntries) {
		return
	}
	if err := h.snapshot(g); err != nil {
		h.cfg.Logger.Error("multiraft: a snapshot failed", "group", g.id, "index", g.applied, "err", err)
		return
	}
	g.askSnap.Store(false)
}

func (h *Host) snapshot(g *group) error {
	index := g.applied
	term, err := g.storage.Term(index)
	if err != nil {
		return err
	}
	data, err := g.sm.Snapshot()
	if err != nil {
		return err
	}
	meta := snap.Meta{Index: index, Term: term, Conf: g.conf, Sections: []snap.Section{{Name: stateSection, Data: data}}}
	g.snapFiles.Lock()
	_, _, err = snap.Write(h.cfg.FS, h.snapDir(g.id), meta, noPairs)
	g.snapFiles.Unlock()
	if err != nil {
		return err
	}
	if _, err := g.storage.CreateSnapshot(index, &g.conf); err != nil && !errors.Is(err, raft.ErrSnapOutOfDate) {
		return err
	}
	if err := g.storage.Compact(index); err != nil && !errors.Is(err, raft.ErrCompacted) {
		return err
	}
	g.snapIndex = index
	return h.released(g, index)
}

// released lets the log delete group g's entries up to index, which a
// durable snapshot holds, and prunes its older snapshots.
func (h *Host) released(g *group, index uint64) error {
	if err := h.cfg.Log.ReleaseTo(g.id, index); err != nil {
		return err
	}
	g.snapFiles.Lock()
	defer g.snapFiles.Unlock()
	return snap.Prune(h.cfg.FS, h.snapDir(g.id), keepSnapshots)
}

// sendSnapshot streams the snapshot that MsgSnap m names to its member.
// g.mu is held.
func (h *Host) sendSnapshot(g *group, m raftpb.Message) {
	md := m.Snapshot.Metadata
	body, size, err := h.openSnapshot(g, md.Index)
	if err != nil {
		h.cfg.Logger.Error("multiraft: cannot send a snapshot", "group", g.id, "to", m.To, "err", err)
		g.rn.ReportSnapshot(m.To, raft.SnapshotFailure)
		return
	}
	h.cfg.Sender.SendSnapshot(m.To, g.id, m, body, size)
}

// openSnapshot opens group g's snapshot at index.
func (h *Host) openSnapshot(g *group, index uint64) (io.ReadCloser, int64, error) {
	g.snapFiles.Lock()
	defer g.snapFiles.Unlock()
	infos, err := snap.List(h.cfg.FS, h.snapDir(g.id))
	if err != nil {
		return nil, 0, err
	}
	for _, in := range infos {
		if in.Index == index {
			return snap.OpenFile(h.cfg.FS, h.snapDir(g.id), in.Name)
		}
	}
	return nil, 0, fmt.Errorf("multiraft: group %d has no snapshot at %d", g.id, index)
}

// ReceiveSnapshot implements transport.Handler: it makes the snapshot that
// body streams durable, then gives its MsgSnap to raft, which so only ever
// takes a snapshot that is durable.
func (h *Host) ReceiveSnapshot(from, group uint64, m raftpb.Message, body io.Reader) error {
	g := h.group(group)
	if g == nil {
		return ErrNoGroup
	}
	if m.Type != raftpb.MsgSnap || m.From != from || m.To != h.cfg.Node || m.Snapshot == nil || raft.IsEmptySnap(*m.Snapshot) {
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
		g.snapshotDone(to, err == nil)
		h.queue.push(g)
	}
}

// installSnapshot makes g's state the snapshot s that raft took from its
// leader, whose restart of the log is durable. g.mu is held.
func (h *Host) installSnapshot(g *group, s raftpb.Snapshot) {
	md := s.Metadata
	infos, err := snap.List(h.cfg.FS, h.snapDir(g.id))
	var meta snap.Meta
	for _, in := range infos {
		if err == nil && in.Index == md.Index {
			meta, err = snap.Verify(h.cfg.FS, path.Join(h.snapDir(g.id), in.Name))
			break
		}
	}
	if err == nil && meta.Index != md.Index {
		err = fmt.Errorf("no snapshot file at %d", md.Index)
	}
	if err == nil {
		err = g.sm.Restore(sectionData(meta))
	}
	if err != nil {
		// The file was durable and checked before raft took it: this is
		// damage since, or a bug.
		panic(fmt.Sprintf("multiraft: group %d: installing the snapshot at %d: %v", g.id, md.Index, err))
	}
	g.applied, g.snapIndex, g.conf = md.Index, md.Index, md.ConfState
	if err := h.released(g, md.Index); err != nil {
		h.cfg.Logger.Error("multiraft: releasing the log after a snapshot", "group", g.id, "err", err)
	}
}
