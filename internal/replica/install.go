package replica

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/snap"
	"github.com/flintkv/flint/internal/vfs"
)

// A member that falls behind its leader's log is sent a snapshot. It is
// installed in three steps, each on the thread that owns what it changes:
//
//  1. ReceiveSnapshot (a transport goroutine) writes the stream to the
//     snapshot directory (snap.Install: verified, fsynced, renamed), and
//     only then hands the MsgSnap to the raft loop: a snapshot raft
//     accepts is always durable first.
//  2. The append thread restarts the log after it (wal.Restart), dropping
//     every entry this member held, resets raft's storage to it, and hands
//     it to the apply thread before it responds to raft: with asynchronous
//     storage writes, raft takes a snapshot as applied once the append
//     thread has it, and hands out no later entry to apply before.
//  3. The apply thread loads it into a new store and puts that in place of
//     the old one (Store), with the applied index and configuration, before
//     it applies any entry after it.

// ReceiveSnapshot installs a snapshot that member from streams
// (transport.Handler) and steps its MsgSnap. A snapshot no newer than what
// this member has applied is refused, as raft would ignore it.
func (r *Replica) ReceiveSnapshot(from, group uint64, m raftpb.Message, body io.Reader) error {
	if m.Type != raftpb.MsgSnap || m.To != r.id || m.From != from || m.Snapshot == nil || raft.IsEmptySnap(*m.Snapshot) {
		return errorf("member %d was sent something other than a snapshot for it", r.id)
	}
	md := m.Snapshot.Metadata
	if md.Index <= r.applied.Load() {
		return errorf("member %d has applied index %d already, past the snapshot's %d", r.id, r.applied.Load(), md.Index)
	}
	// Its log waits for space to write what it holds, which it must write
	// before it could take the snapshot; the snapshot's file would only
	// take that space.
	if r.noSpace.Load() {
		return fmt.Errorf("%w (member %d takes no snapshot until then)", ErrNoSpace, r.id)
	}
	r.snaps.files.Lock()
	_, err := snap.Install(r.opt.FS, r.snapDir(), snap.Info{Index: md.Index, Term: md.Term}, body)
	r.snaps.files.Unlock()
	if err != nil {
		return err
	}
	select {
	case r.recvc <- m:
		return nil
	case <-r.dead:
		return ErrStopped
	}
}

// restartLog is the append thread's part of installing snapshot s, with
// the hard state hs: the log starts over after it. A full disk is retried
// until space is freed, as for any write; other failures stop the replica.
// It reports whether the replica may go on.
func (r *Replica) restartLog(s raftpb.Snapshot, hs raftpb.HardState) bool {
	md := s.Metadata
	r.snaps.files.Lock()
	err := vfs.RetryNoSpace(func() error { return r.wal.Restart(md.Index, hs) }, r.untilSpace(minSpace))
	r.snaps.files.Unlock()
	if err != nil {
		if !vfs.IsNoSpace(err) {
			r.fail(err)
		}
		return false
	}
	if err := r.storage.ApplySnapshot(s); err != nil && !errors.Is(err, raft.ErrSnapOutOfDate) {
		r.fail(errorf("raft storage: %w", err))
		return false
	}
	if !raft.IsEmptyHardState(hs) {
		r.storage.SetHardState(hs)
	}
	return true
}

// installSnapshot is the apply thread's part: the store becomes the
// snapshot's state.
func (r *Replica) installSnapshot(md raftpb.SnapshotMetadata) error {
	start := time.Now()
	info, err := r.snapFile(md)
	if err != nil {
		return err
	}
	st, meta, err := r.loadStore(info)
	var members map[uint64][]byte
	if err == nil {
		members, err = membersOf(meta.Sections)
	}
	if err != nil {
		return errorf("loading the snapshot sent by the leader: %w", err)
	}
	r.setMembers(members)
	if err := r.restoreIncarnations(meta.Sections); err != nil {
		return err
	}
	r.st.Swap(st).Replaced() // so that the server's expirer watches st
	r.applied.Store(md.Index)
	r.conf = md.ConfState
	s := &r.snaps
	s.appliedTerm, s.entries, s.bytes = md.Term, 0, 0
	s.mu.Lock()
	s.last = snapInfo{index: md.Index, name: info.Name, took: time.Since(start), at: time.Now()}
	s.mu.Unlock()
	r.opt.Logger.Info("installed a snapshot sent by the leader", "member", r.id, "index", md.Index,
		"term", md.Term, "keys", st.Len(), "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// snapFile returns the snapshot file at md's index and term.
func (r *Replica) snapFile(md raftpb.SnapshotMetadata) (snap.Info, error) {
	snaps, err := snap.List(r.opt.FS, r.snapDir())
	if err != nil {
		return snap.Info{}, err
	}
	i := slices.IndexFunc(snaps, func(s snap.Info) bool { return s.Index == md.Index && s.Term == md.Term })
	if i < 0 {
		return snap.Info{}, errorf("no snapshot file at index %d term %d", md.Index, md.Term)
	}
	return snaps[i], nil
}
