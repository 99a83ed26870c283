package multiraft

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/raftlog"
	"github.com/flintkv/flint/internal/wal"
)

// group is one raft group on the host.
type group struct {
	id      uint64
	storage *raftlog.Storage
	sm      StateMachine
	lead    atomic.Uint64 // the leader as raft last said, or 0
	// quiesced: the group is not ticked (see the package doc); qlead is
	// the leader's node that it quiesced under.
	quiesced atomic.Bool
	qlead    atomic.Uint64
	queued   atomic.Bool // in the host's queue: pushed once until a worker takes it
	// snapper is sm, if a Snapshotter, or nil: the group takes no
	// snapshots.
	snapper Snapshotter
	// askSnap: the log asked the group to snapshot (see askSnapshots).
	askSnap atomic.Bool
	// snapFiles serializes the writes and installs of the group's
	// snapshot files, and a Restore with the write of a snapshot (see
	// snapLoop). snapGen counts the snapshots installed from a leader,
	// so that a snapshot of the state before one is not written after
	// it: written holding both mu and snapFiles, read holding either.
	snapFiles sync.Mutex
	snapGen   uint64

	// in is what waits for a worker, filled by any goroutine.
	in struct {
		sync.Mutex
		msgs        []raftpb.Message
		unreachable []uint64
		ticks       int
		quiesce     *raftpb.Message // the leader's last quiesce message
		removedAt   uint64          // the newest index a member says this node was removed by
		written     bool            // the log writer saved rd
		snapsSent   []snapSent      // snapshot streams to members, ended
		snapsDone   []snapDone      // snapshots of this member, written
	}

	// mu is held by the worker processing the group, and by Propose.
	mu sync.Mutex
	rn *raft.RawNode
	// rd is the Ready whose write is with the log writer, or nil: the
	// next Ready waits for it.
	rd *raft.Ready
	// idle counts the ticks since the group last had entries to write or
	// apply, or a proposal.
	idle int
	// quiesce is the leader's quiesce message that this follower has not
	// taken yet, as it had work left (see quiesceFollower), or nil.
	quiesce *raftpb.Message
	// saved is the hard state last written: one that changes only the
	// commit index is not written (see ready).
	saved   raftpb.HardState
	waiters map[uint64]chan result // proposals made here, by id
	// reads are the read barriers waiting for raft to confirm their read
	// index, by id; readWaits those waiting to apply up to it.
	reads     map[uint64]chan error
	readWaits []readWait
	// Invariant: snapIndex <= applied. applied is the last entry applied
	// to sm (or the snapshot sm was restored from), appliedTerm its term,
	// and conf the group's configuration as of it; snapIndex is that of
	// the newest snapshot durable here, which raft's storage and the log
	// are compacted to. snapping: a snapshot is being written.
	applied, appliedTerm, snapIndex uint64
	conf                            raftpb.ConfState
	snapping                        bool
	// changing is the membership change proposed here and waiting, or
	// nil; removed: this node was removed from the group, which stopped.
	changing *confWait
	removed  bool
	// roster is the group's roster as of applied (see roster.go):
	// written with mu held, read by anyone.
	roster atomic.Pointer[roster]
}

type result struct {
	v   any
	err error
}

// newGroup returns group id, restored from snap, which takes snapshots if
// snapshots and sm is a Snapshotter.
func newGroup(id uint64, rn *raft.RawNode, storage *raftlog.Storage, sm StateMachine, saved raftpb.HardState, snap raftpb.SnapshotMetadata, snapshots bool) *group {
	g := &group{id: id, rn: rn, storage: storage, sm: sm, saved: saved, waiters: map[uint64]chan result{}, reads: map[uint64]chan error{},
		applied: snap.Index, appliedTerm: snap.Term, snapIndex: snap.Index, conf: snap.ConfState}
	if snapshots {
		g.snapper, _ = sm.(Snapshotter)
	}
	g.roster.Store(emptyRoster)
	return g
}

// quiesceContext marks a leader's quiesce message (see the package doc).
var quiesceContext = []byte("quiesce")

// receive queues msgs for the worker, and reports whether there are any.
// A message wakes the group, unless it is a heartbeat or a response to
// one: a leader's heartbeat sent before its quiesce message may arrive
// after it, and its followers' responses after it quiesced.
func (g *group) receive(msgs []raftpb.Message) bool {
	g.in.Lock()
	defer g.in.Unlock()
	for i := range msgs {
		if m := &msgs[i]; m.Type == raftpb.MsgHeartbeat && string(m.Context) == string(quiesceContext) {
			g.in.quiesce = m
			continue
		} else if m.Type == raftpb.MsgHeartbeat && string(m.Context) == string(removedContext) {
			g.in.removedAt = max(g.in.removedAt, m.Commit)
			continue
		}
		if !isHeartbeat(msgs[i].Type) {
			g.wake()
		}
		g.in.msgs = append(g.in.msgs, msgs[i])
	}
	return len(msgs) > 0
}

func (g *group) unreachable(to uint64) {
	g.in.Lock()
	defer g.in.Unlock()
	g.in.unreachable = append(g.in.unreachable, to)
}

func (g *group) tick() {
	g.in.Lock()
	defer g.in.Unlock()
	g.in.ticks++
}

// written records that the log writer saved rd.
func (g *group) written() {
	g.in.Lock()
	defer g.in.Unlock()
	g.in.written = true
}

// wake makes the group tick again.
func (g *group) wake() { g.quiesced.Store(false) }

// process is a worker's turn with group g: it finishes the Ready that
// the log writer saved, steps what arrived, and hands the next Ready's
// write to the writer, or finishes it if it has none.
func (h *Host) process(g *group) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.removed {
		return
	}
	g.in.Lock()
	msgs, unreachable, ticks, quiesce, written := g.in.msgs, g.in.unreachable, g.in.ticks, g.in.quiesce, g.in.written
	g.in.msgs, g.in.unreachable, g.in.ticks, g.in.quiesce, g.in.written = nil, nil, 0, nil, false
	sent, done, removedAt := g.in.snapsSent, g.in.snapsDone, g.in.removedAt
	g.in.snapsSent, g.in.snapsDone = nil, nil
	g.in.Unlock()
	for _, s := range sent {
		status := raft.SnapshotFinish
		if !s.ok {
			status = raft.SnapshotFailure
		}
		g.rn.ReportSnapshot(s.to, status)
	}
	if written {
		rd := *g.rd
		g.rd = nil
		h.finish(g, rd)
	}
	for _, d := range done {
		h.snapshotWritten(g, d)
	}
	if g.removed {
		return
	}
	if removedAt > g.applied && isMember(g.conf, h.cfg.Node) {
		h.removeGroup(g) // see tellRemoved
		return
	}
	for _, to := range unreachable {
		g.rn.ReportUnreachable(to)
	}
	h.tellRemoved(g, msgs)
	r := g.roster.Load()
	for _, m := range msgs {
		if r.isRemoved(m.From) {
			continue // a removed member's: tellRemoved answered it
		}
		if !isHeartbeat(m.Type) {
			g.quiesce = nil // woken since
		}
		// Errors are raft's refusals of a message it cannot take (from a
		// member it does not know, a proposal with no leader): dropped,
		// as the network may drop any message.
		_ = g.rn.Step(m)
	}
	for range ticks {
		g.rn.Tick()
		g.idle++
	}
	h.ready(g)
	if g.removed {
		return
	}
	h.maybeSnapshot(g)
	if quiesce != nil {
		g.quiesce = quiesce
	}
	if g.quiesce != nil && g.quiesceFollower(g.quiesce) {
		g.quiesce = nil
	}
	if ticks > 0 && g.idle >= h.cfg.QuiesceTicks {
		h.quiesceLeader(g)
	}
}

// ready takes raft's Readys until one has a write, which it hands to the
// log writer, or until raft has none.
func (h *Host) ready(g *group) {
	for g.rd == nil && !g.removed && g.rn.HasReady() {
		rd := g.rn.Ready()
		if rd.SoftState != nil {
			g.lead.Store(rd.SoftState.Lead)
			if rd.SoftState.RaftState != raft.StateLeader {
				g.dropWaiters(errLeadershipLost) // their entries may or may not commit
			}
		}
		g.placeChange(rd.Entries, h.cfg.Node)
		if len(rd.Entries) > 0 || len(rd.CommittedEntries) > 0 {
			g.idle = 0
		}
		// A hard state that changes only the commit index is not written
		// (as in package replica): the commit index is volatile in raft,
		// which a restart may find older, and learns again. That spares a
		// follower an fsync for each commit its leader tells it of.
		hs := rd.HardState
		if !raft.IsEmptyHardState(hs) && hs.Term == g.saved.Term && hs.Vote == g.saved.Vote {
			hs = raftpb.HardState{}
		}
		if len(rd.Entries) > 0 || !raft.IsEmptyHardState(hs) || !raft.IsEmptySnap(rd.Snapshot) {
			if !raft.IsEmptyHardState(rd.HardState) {
				g.saved = rd.HardState
			}
			g.rd = &rd
			x := wal.Write{Group: g.id, Entries: rd.Entries, HardState: rd.HardState}
			var s *raftpb.Snapshot
			if !raft.IsEmptySnap(rd.Snapshot) {
				s, x.Restart = &rd.Snapshot, rd.Snapshot.Metadata.Index
			}
			h.writer.submit(g, x, s)
			return
		}
		h.finish(g, rd)
	}
}

// finish completes rd, whose write (if any) is durable: the snapshot it
// installs becomes the state, its messages go (a snapshot as a stream of
// its own), its committed entries are applied, read barriers that waited
// for them are answered, and raft advances.
func (h *Host) finish(g *group, rd raft.Ready) {
	if !raft.IsEmptySnap(rd.Snapshot) {
		h.installSnapshot(g, rd.Snapshot.Metadata)
	}
	msgs := rd.Messages[:0:0]
	for _, m := range rd.Messages {
		if m.Type == raftpb.MsgSnap {
			h.sendSnapshot(g, m)
		} else {
			msgs = append(msgs, m)
		}
	}
	h.send(g.id, msgs)
	for _, e := range rd.CommittedEntries {
		if e.Index != g.applied+1 {
			// The state would not be the log's: a snapshot that does
			// not match its index, or an entry skipped.
			panic(fmt.Sprintf("multiraft: group %d applies entry %d after entry %d", g.id, e.Index, g.applied))
		}
		g.applied, g.appliedTerm = e.Index, e.Term
		switch {
		case e.Type == raftpb.EntryConfChange || e.Type == raftpb.EntryConfChangeV2:
			if !h.applyConfChange(g, &e) {
				h.removeGroup(g)
				return
			}
		case len(e.Data) > 0:
			g.checkChange(&e)
			h.apply(g, e)
		default:
			g.checkChange(&e)
		}
	}
	g.confirmReads(rd.ReadStates)
	g.rn.Advance(rd)
}

// apply applies entry e to the group's state, and answers its proposer if
// it is waiting here.
func (h *Host) apply(g *group, e raftpb.Entry) {
	node, id, data, err := decodeProposal(e.Data)
	if err != nil {
		panic(fmt.Sprintf("multiraft: group %d, entry %d: %v", g.id, e.Index, err)) // the log is damaged
	}
	v := g.sm.Apply(e.Index, data)
	if node != h.cfg.Node {
		return
	}
	if ch, ok := g.waiters[id]; ok {
		delete(g.waiters, id)
		ch <- result{v: v}
	}
}

// dropWaiters answers every proposal waiting with err.
func (g *group) dropWaiters(err error) {
	for id, ch := range g.waiters {
		delete(g.waiters, id)
		ch <- result{err: err}
	}
}

// Propose proposes data to group id, whose leader this node must be, and
// returns what the group's StateMachine.Apply returned for it once it is
// committed and applied here. ErrNotLeader and ErrNoGroup mean that
// nothing was proposed; ErrUnknownState (the context ended first) and
// ErrStopped that it may or may not be applied.
func (h *Host) Propose(ctx context.Context, id uint64, data []byte) (any, error) {
	g := h.group(id)
	if g == nil {
		return nil, ErrNoGroup
	}
	pid := h.proposals.Add(1)
	ch := make(chan result, 1)
	if err := h.lockLeading(g, true); err != nil {
		return nil, err
	}
	if err := g.rn.Propose(encodeProposal(h.cfg.Node, pid, data)); err != nil {
		g.mu.Unlock()
		return nil, fmt.Errorf("%w: %w", ErrNotLeader, err)
	}
	g.waiters[pid] = ch
	g.idle = 0
	g.mu.Unlock()
	h.queue.push(g)
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		g.mu.Lock()
		delete(g.waiters, pid)
		g.mu.Unlock()
		return nil, fmt.Errorf("%w: %w", ErrUnknownState, ctx.Err())
	case <-h.stop:
		return nil, ErrStopped
	}
}

// lockLeading locks g.mu and wakes g, or returns why not, with g.mu not
// held: g was removed from this node (ErrRemoved), or this node sees no
// leader, or, if self, is not the leader itself (ErrNotLeader).
func (h *Host) lockLeading(g *group, self bool) error {
	g.mu.Lock()
	g.wake()
	err := ErrRemoved
	switch lead := g.lead.Load(); {
	case g.removed:
	case lead == 0 || self && lead != h.cfg.Node:
		err = ErrNotLeader
	default:
		return nil
	}
	g.mu.Unlock()
	return err
}

// A proposal's entry is the proposing node's id and the proposal's id, as
// uvarints, then the data, so that the node that proposed it answers its
// proposer when it applies it.
func encodeProposal(node, id uint64, data []byte) []byte {
	b := binary.AppendUvarint(make([]byte, 0, len(data)+2*binary.MaxVarintLen64), node)
	return append(binary.AppendUvarint(b, id), data...)
}

func decodeProposal(b []byte) (node, id uint64, data []byte, err error) {
	node, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, 0, nil, errors.New("a proposal without its node")
	}
	id, m := binary.Uvarint(b[n:])
	if m <= 0 {
		return 0, 0, nil, errors.New("a proposal without its id")
	}
	return node, id, b[n+m:], nil
}
