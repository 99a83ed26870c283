package multiraft

import (
	"context"
	"encoding/binary"
	"fmt"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// readWait is a read barrier whose read index raft confirmed, waiting for
// the group to apply up to it.
type readWait struct {
	index uint64
	ch    chan error
}

// ReadBarrier returns once group id's StateMachine on this node reflects
// every write acknowledged before the call, by any node: raft's read index
// (ReadOnlySafe: a quorum answers the leader's heartbeat; a follower asks
// its leader for it), applied here. ErrNotLeader says that this node knows
// of no leader; with ErrUnknownState (ctx ended first, as when the leader
// was lost meanwhile) or ErrStopped, the state may not reflect them yet.
func (h *Host) ReadBarrier(ctx context.Context, id uint64) error {
	g := h.group(id)
	if g == nil {
		return ErrNoGroup
	}
	rid := h.proposals.Add(1)
	ch := make(chan error, 1)
	if err := h.lockLeading(g, false); err != nil {
		return err
	}
	g.rn.ReadIndex(binary.BigEndian.AppendUint64(nil, rid))
	g.reads[rid] = ch
	g.mu.Unlock()
	h.queue.push(g)
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		g.mu.Lock()
		delete(g.reads, rid)
		g.mu.Unlock()
		return fmt.Errorf("%w: %w", ErrUnknownState, ctx.Err())
	case <-h.stop:
		return ErrStopped
	}
}

// confirmReads takes the read indexes that raft confirmed in a Ready, and
// answers every read barrier whose index the group has applied. g.mu is
// held.
func (g *group) confirmReads(states []raft.ReadState) {
	for _, rs := range states {
		if len(rs.RequestCtx) != 8 {
			continue
		}
		rid := binary.BigEndian.Uint64(rs.RequestCtx)
		if ch, ok := g.reads[rid]; ok {
			delete(g.reads, rid)
			g.readWaits = append(g.readWaits, readWait{rs.Index, ch})
		}
	}
	n := 0
	for _, w := range g.readWaits {
		if w.index <= g.applied {
			w.ch <- nil
		} else {
			g.readWaits[n] = w
			n++
		}
	}
	clear(g.readWaits[n:])
	g.readWaits = g.readWaits[:n]
}

// dropReads answers every read barrier waiting with err. g.mu is held.
func (g *group) dropReads(err error) {
	for rid, ch := range g.reads {
		delete(g.reads, rid)
		ch <- err
	}
	for _, w := range g.readWaits {
		w.ch <- err
	}
	g.readWaits = nil
}

// isHeartbeat reports whether t is a heartbeat or its response, which
// neither wake a quiesced group nor cancel its quiescing.
func isHeartbeat(t raftpb.MessageType) bool {
	return t == raftpb.MsgHeartbeat || t == raftpb.MsgHeartbeatResp
}
