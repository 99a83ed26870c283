package multiraft

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Membership changes are raft's configuration changes (ConfChangeV2), one
// at a time, proposed by the group's leader. A new member joins as a
// learner, which the leader catches up (by snapshot if its log no longer
// holds what the learner lacks) without counting it in any quorum, and is
// then promoted to voter, as package replica does. The configuration is
// raft's: the group's first members (AddGroup's), then each change in the
// log as it is applied, and the configuration as of a snapshot in the
// snapshot's header, so that a restart finds it from the snapshot and the
// log after it. A change's entry carries, as its context, the proposing
// node and proposal, as a proposal's entry does, then, as its data, the
// info of the member it adds (AddMember's; none for a promotion, a
// removal, or an entry written before infos were), which the group's
// roster keeps (see roster.go).

// Errors of membership changes.
var (
	// ErrRemoved answers what waits on a group that a configuration
	// without this node stopped on this node.
	ErrRemoved = errors.New("multiraft: this node was removed from the group")
	// ErrChangeRefused says that a change was not made: raft refused it,
	// as one proposed since the leader was elected was not applied yet,
	// or the leader lost the entry to another's. It may be tried again.
	ErrChangeRefused = errors.New("multiraft: the membership change was not made (another one was pending, or the leader changed); try again")
	// ErrChangeInProgress refuses a change while another is being made
	// through this node.
	ErrChangeInProgress = errors.New("multiraft: another membership change of the group is in progress on this node")
	// ErrNoMember refuses a change that names no member of the group.
	ErrNoMember = errors.New("multiraft: no member of the group has that node id")
	// ErrLearner refuses to hand leadership to a learner, which cannot
	// lead until it is promoted.
	ErrLearner = errors.New("multiraft: that member is a learner, which cannot lead until it is promoted")
)

// confWait is a membership change proposed here, waiting to be applied.
type confWait struct {
	pid   uint64 // its proposal id (see encodeProposal)
	index uint64 // its entry's index, once raft appended it, or 0
	ch    chan error
}

// AddMember adds node to group id, whose leader this node must be: as a
// learner, then, once the learner's log reaches the index this node had
// applied when the learner was added, as a voter. It returns once the
// promotion is applied here. info (its addresses, say) goes with the
// learner's change, and every member learns it as it applies it
// (MemberInfo, Config.OnMember), the leader first, before it sends the
// learner anything. Called for a learner (one that an earlier call added
// and did not promote), it waits and promotes, and the learner keeps its
// info; for a voter, it does nothing. The new node runs the group with
// AddGroup, given the group's first members, before or after the call. A
// node id removed from the group is refused with ErrRemovedID.
func (h *Host) AddMember(ctx context.Context, id, node uint64, info []byte) error {
	g := h.group(id)
	if g == nil {
		return ErrNoGroup
	}
	if g.roster.Load().isRemoved(node) {
		return fmt.Errorf("%w: node %d, group %d", ErrRemovedID, node, id)
	}
	switch g.role(node) {
	case "voter":
		return nil
	case "":
		if err := h.change(ctx, g, raftpb.ConfChangeAddLearnerNode, node, info); err != nil {
			return err
		}
	}
	g.mu.Lock()
	target := g.applied
	g.mu.Unlock()
	for {
		if pr, ok := g.status().Progress[node]; ok && pr.Match >= target {
			break
		}
		select {
		case <-time.After(h.cfg.TickInterval):
		case <-ctx.Done():
			return fmt.Errorf("%w: learner %d did not catch up: %w", ErrUnknownState, node, ctx.Err())
		case <-h.stop:
			return ErrStopped
		}
	}
	return h.change(ctx, g, raftpb.ConfChangeAddNode, node, nil)
}

// RemoveMember removes node from group id, whose leader this node must
// be, and returns once the change is applied here. The removed node stops
// the group once it applies the change, and releases its log of it; a
// leader that removes itself does so too, and the others elect a new one
// (TransferLeadership first spares them the wait).
func (h *Host) RemoveMember(ctx context.Context, id, node uint64) error {
	g := h.group(id)
	if g == nil {
		return ErrNoGroup
	}
	if g.role(node) == "" {
		return fmt.Errorf("%w: %d", ErrNoMember, node)
	}
	err := h.change(ctx, g, raftpb.ConfChangeRemoveNode, node, nil)
	if node == h.cfg.Node && errors.Is(err, ErrRemoved) {
		return nil // this node applied its removal, and stopped the group
	}
	return err
}

// TransferLeadership asks this node, group id's leader, to hand its
// leadership to voter to, and waits until this node sees to lead. raft
// gives a transfer up after an election timeout (to may be behind, or a
// message lost): it is asked again then, until ctx ends.
func (h *Host) TransferLeadership(ctx context.Context, id, to uint64) error {
	g := h.group(id)
	if g == nil {
		return ErrNoGroup
	}
	switch g.role(to) {
	case "":
		return fmt.Errorf("%w: %d", ErrNoMember, to)
	case "learner":
		return fmt.Errorf("%w: %d", ErrLearner, to)
	}
	timeout := time.Duration(h.cfg.ElectionTicks) * h.cfg.TickInterval
	for {
		g.mu.Lock()
		g.wake()
		if g.lead.Load() == h.cfg.Node {
			g.rn.TransferLeader(to)
		}
		g.mu.Unlock()
		h.queue.push(g)
		for deadline := time.Now().Add(timeout); time.Now().Before(deadline); {
			if g.lead.Load() == to {
				return nil
			}
			select {
			case <-time.After(h.cfg.TickInterval):
			case <-ctx.Done():
				return fmt.Errorf("%w: %w", ErrUnknownState, ctx.Err())
			case <-h.stop:
				return ErrStopped
			}
		}
		if l := g.lead.Load(); l != h.cfg.Node && l != 0 && l != to {
			return ErrNotLeader
		}
	}
}

// status returns raft's status of g, with each member's progress if this
// node leads it.
func (g *group) status() raft.Status {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.rn.Status()
}

// role returns "voter" or "learner" for a member of g's configuration,
// or "" for a node that is not one.
func (g *group) role(node uint64) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch cs := &g.conf; {
	case slices.Contains(cs.Voters, node) || slices.Contains(cs.VotersOutgoing, node):
		return "voter"
	case slices.Contains(cs.Learners, node) || slices.Contains(cs.LearnersNext, node):
		return "learner"
	}
	return ""
}

// change proposes the change typ of node, with info, to group g, whose
// leader this node must be, and waits until it is applied here.
func (h *Host) change(ctx context.Context, g *group, typ raftpb.ConfChangeType, node uint64, info []byte) error {
	pid := h.proposals.Add(1)
	w := &confWait{pid: pid, ch: make(chan error, 1)}
	cc := raftpb.ConfChangeV2{Changes: []raftpb.ConfChangeSingle{{Type: typ, NodeID: node}}, Context: encodeProposal(h.cfg.Node, pid, info)}
	if err := h.lockLeading(g, true); err != nil {
		return err
	}
	if g.changing != nil {
		g.mu.Unlock()
		return ErrChangeInProgress
	}
	if err := g.rn.ProposeConfChange(cc); err != nil {
		g.mu.Unlock()
		return fmt.Errorf("%w: %w", ErrNotLeader, err)
	}
	g.changing = w
	g.idle = 0
	g.mu.Unlock()
	h.queue.push(g)
	select {
	case err := <-w.ch:
		return err
	case <-ctx.Done():
		g.mu.Lock()
		if g.changing == w {
			g.changing = nil
		}
		g.mu.Unlock()
		return fmt.Errorf("%w: %w", ErrUnknownState, ctx.Err())
	case <-h.stop:
		return ErrStopped
	}
}

// placeChange finds, in entries raft just appended as the leader, the
// entry of the change waiting here, if its index is not yet known: raft
// appends a change it refuses as an empty entry, so its absence answers
// ErrChangeRefused. g.mu is held.
func (g *group) placeChange(entries []raftpb.Entry, node uint64) {
	w := g.changing
	if w == nil || w.index != 0 || len(entries) == 0 || g.lead.Load() != node {
		return
	}
	i := slices.IndexFunc(entries, func(e raftpb.Entry) bool { return g.isChange(&e, w, node) })
	if i < 0 {
		g.endChange(ErrChangeRefused)
		return
	}
	w.index = entries[i].Index
}

// isChange reports whether e is the entry of the change w, proposed by
// node.
func (g *group) isChange(e *raftpb.Entry, w *confWait, node uint64) bool {
	cc, err := decodeConfChange(e)
	if err != nil {
		return false
	}
	n, pid, _, err := decodeProposal(cc.Context)
	return err == nil && n == node && pid == w.pid
}

// endChange answers the change waiting here with err. g.mu is held.
func (g *group) endChange(err error) {
	g.changing.ch <- err
	g.changing = nil
}

// applyConfChange applies the configuration change e to raft, answers
// its proposer if waiting here, and reports whether this node keeps the
// group: false once a change removes it. A node that joins the group
// applies the changes made before its own (another node's addition, a
// removal) while not a member yet, and keeps it. g.mu is held.
func (h *Host) applyConfChange(g *group, e *raftpb.Entry) bool {
	cc, err := decodeConfChange(e)
	if err != nil {
		panic(fmt.Sprintf("multiraft: group %d, entry %d: %v", g.id, e.Index, err)) // the log is damaged
	}
	was := isMember(g.conf, h.cfg.Node)
	g.conf = *g.rn.ApplyConfChange(cc)
	_, _, info, _ := decodeProposal(cc.Context) // none in a change raft made itself
	g.roster.Store(g.roster.Load().apply(cc, info, func(node uint64, info []byte) { h.learned(g.id, node, info) }))
	h.addPeers(g.conf)
	// The next snapshot holds the new configuration: a new member can
	// take none of an older one (see sendSnapshot).
	if g.snapper != nil {
		g.askSnap.Store(true)
	}
	if w := g.changing; w != nil && g.isChange(e, w, h.cfg.Node) {
		g.endChange(nil)
	} else {
		g.checkChange(e)
	}
	return !was || isMember(g.conf, h.cfg.Node)
}

// checkChange answers the change waiting here with ErrChangeRefused if
// entry e, not the change's, took the index its entry had (another
// leader's entry replaced it). g.mu is held.
func (g *group) checkChange(e *raftpb.Entry) {
	if w := g.changing; w != nil && w.index == e.Index {
		g.endChange(ErrChangeRefused)
	}
}

// isMember reports whether node is a voter or a learner of cs.
func isMember(cs raftpb.ConfState, node uint64) bool {
	for _, ids := range [][]uint64{cs.Voters, cs.Learners, cs.VotersOutgoing, cs.LearnersNext} {
		if slices.Contains(ids, node) {
			return true
		}
	}
	return false
}

// decodeConfChange decodes a configuration change entry: a Host and raft
// write only ConfChangeV2 ones.
func decodeConfChange(e *raftpb.Entry) (raftpb.ConfChangeV2, error) {
	var cc raftpb.ConfChangeV2
	if e.Type != raftpb.EntryConfChangeV2 {
		return cc, fmt.Errorf("a configuration change of type %v", e.Type)
	}
	return cc, cc.Unmarshal(e.Data)
}

// removedContext marks a notice to a node that sent a message of the
// group but is not in the sender's configuration as of the index in the
// notice's Commit (see tellRemoved).
var removedContext = []byte("removed")

// tellRemoved answers the senders of msgs that are not members of g's
// configuration, as of g.applied, that they are not. A removed member
// that missed the commit of its removal, as the leader no longer sends it
// anything, so learns of it when it campaigns: a member of the group in
// its configuration whose configuration is newer than its own (at a later
// index) and does not hold it means that it was removed, and it stops
// the group. An older one proves nothing (this node may lag), nor does
// one of a node that is not a member in its own configuration (a node
// joining the group, which starts with the group's first members). g.mu is
// held.
func (h *Host) tellRemoved(g *group, msgs []raftpb.Message) {
	var told []uint64
	for _, m := range msgs {
		if m.From == h.cfg.Node || m.From == 0 || isMember(g.conf, m.From) || slices.Contains(told, m.From) {
			continue
		}
		told = append(told, m.From)
		h.cfg.Sender.Send(m.From, g.id, []raftpb.Message{{Type: raftpb.MsgHeartbeat, To: m.From, From: h.cfg.Node, Commit: g.applied, Context: removedContext}})
	}
}

// removeGroup stops group g on this node, which a configuration without
// it removed from the group: what waits on it gets ErrRemoved, the host
// drops it, and the log lets go of its entries. Its snapshot files stay.
// g.mu is held.
func (h *Host) removeGroup(g *group) {
	g.removed = true
	g.dropWaiters(ErrRemoved)
	g.dropReads(ErrRemoved)
	if g.changing != nil {
		g.endChange(ErrRemoved)
	}
	h.mu.Lock()
	delete(h.mu.groups, g.id)
	h.mu.list = slices.DeleteFunc(slices.Clone(h.mu.list), func(x *group) bool { return x == g })
	h.mu.Unlock()
	if err := h.cfg.Log.ReleaseTo(g.id, math.MaxUint64); err != nil {
		h.cfg.Logger.Error("multiraft: releasing the log of a group this node was removed from", "group", g.id, "err", err)
	}
	h.cfg.Logger.Info("multiraft: removed from the group; it stops on this node", "group", g.id, "node", h.cfg.Node)
}
