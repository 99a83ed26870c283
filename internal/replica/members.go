package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/snap"
)

// Membership changes are raft configuration changes (ConfChangeV2), one at
// a time: a new member joins as a learner, which the leader catches up
// without counting it in any quorum, and is then promoted to voter. Each
// change carries what the caller knows of the member (its addresses, say,
// as Options.Members), which every member keeps with the configuration
// and in its snapshots, so that any of them can tell a client or a peer
// where the others are.
//
// A change's entry is applied on the apply thread, which hands it to the
// raft loop (RawNode.ApplyConfChange, which only the loop may call) and
// waits for the new configuration before it applies the next entry.
//
// The context of a change's entry is:
//
//	+-------------------+------------------+------------------+
//	| version (1) 1 byte| proposal id uvar | member info      |
//	+-------------------+------------------+------------------+

const confContextVersion = 1

// ErrRemoved is why a replica stops once a configuration without it is
// applied: it no longer belongs to its group.
var ErrRemoved = errors.New("replica: this member was removed from its group")

// ErrChangeInProgress refuses a membership change while another one is
// being made through this member.
var ErrChangeInProgress = errors.New("replica: another membership change is in progress; try again once it is done")

// confApply asks the raft loop to apply a committed change.
type confApply struct {
	cc   raftpb.ConfChangeV2
	done chan raftpb.ConfState
}

// confPropose asks the raft loop to propose a change, or to transfer
// leadership (transfer is the member to transfer it to).
type confPropose struct {
	p        *proposal
	cc       raftpb.ConfChangeV2
	transfer uint64
}

// ErrIDTaken refuses to add a member under an id that is, or was, a
// member's: a member id is never reused, since raft would take a new
// member with an old id for the old one, log and vote included.
var ErrIDTaken = errors.New("replica: that member id is, or was, a member's; a new member takes a new id")

// retired is the info a removed member leaves behind in the members'
// table, so that its id is never reused; Members and MemberInfo skip it.
const retired = "\x00retired"

// ErrNoMember refuses a change that names no current member of the group.
var ErrNoMember = errors.New("replica: no current member of the group has that id")

// ErrLearner refuses to hand leadership to a learner, which cannot lead
// until it is promoted.
var ErrLearner = errors.New("replica: that member is a learner, which cannot lead until it is promoted to voter")

// AddLearner proposes adding member id, with info, as a learner, and
// returns once the change is applied here. Errors are Apply's, and
// ErrIDTaken.
func (r *Replica) AddLearner(ctx context.Context, id uint64, info []byte) error {
	r.membersMu.Lock()
	_, taken := r.members[id]
	r.membersMu.Unlock()
	if taken {
		return ErrIDTaken
	}
	return r.change(ctx, raftpb.ConfChangeAddLearnerNode, id, info)
}

// Promote proposes making learner id a voter.
func (r *Replica) Promote(ctx context.Context, id uint64) error {
	return r.change(ctx, raftpb.ConfChangeAddNode, id, r.Members()[id])
}

// Remove proposes removing member id from the group. A removed member
// stops (ErrRemoved); a removed leader steps down first. An id that names
// no current member is refused (ErrNoMember): raft would take its removal
// as done, and the id would be retired for nothing.
//
// A leader that removes itself steps down as it applies the change, and
// losing leadership fails its waiters (ErrOutcomeUnknown) before the
// change's own waiter is answered; its stopping with ErrRemoved right
// after is then the answer.
func (r *Replica) Remove(ctx context.Context, id uint64) error {
	st, err := r.Status(ctx)
	if err != nil {
		return err
	}
	if role(st, id) == "" {
		return fmt.Errorf("%w: %d", ErrNoMember, id)
	}
	err = r.change(ctx, raftpb.ConfChangeRemoveNode, id, nil)
	if id == r.id && errors.Is(err, ErrOutcomeUnknown) {
		select {
		case <-r.dead:
			if errors.Is(r.Err(), ErrRemoved) {
				return nil
			}
		case <-ctx.Done():
		}
	}
	return err
}

// role returns "voter" or "learner" for a member of st's configuration,
// or "" for an id that is not one.
func role(st raft.Status, id uint64) string {
	_, in := st.Config.Voters[0][id]
	_, out := st.Config.Voters[1][id]
	_, learner := st.Config.Learners[id]
	_, next := st.Config.LearnersNext[id]
	switch {
	case in || out:
		return "voter"
	case learner || next:
		return "learner"
	}
	return ""
}

// AddMember adds member id as a learner, waits until it has caught up with
// the leader's log (its match index reaches the commit index the leader
// had when it was added), and promotes it. It must be called at the
// leader; it returns once the promotion is applied. Called again for a
// learner that an earlier call added with the same info (one whose wait
// ended before the learner caught up), it resumes: waits, and promotes.
func (r *Replica) AddMember(ctx context.Context, id uint64, info []byte) error {
	st, err := r.Status(ctx)
	if err != nil {
		return err
	}
	resume := role(st, id) == "learner" && string(r.MemberInfo(id)) == string(info)
	if !resume {
		if err := r.AddLearner(ctx, id, info); err != nil {
			return err
		}
	}
	target := r.applied.Load()
	for {
		st, err := r.Status(ctx)
		if err != nil {
			return err
		}
		if pr, ok := st.Progress[id]; ok && pr.Match >= target {
			break
		}
		select {
		case <-time.After(r.opt.TickInterval):
		case <-ctx.Done():
			return fmt.Errorf("replica: learner %d did not catch up (is it running, and reachable at its peer address?): %w", id, ctx.Err())
		}
	}
	return r.Promote(ctx, id)
}

// TransferLeadership asks the leader, this member, to hand leadership to
// member to, and waits until this member sees to lead, or ctx ends. raft
// gives up a transfer after an election timeout (to may be behind, or a
// message lost): it is asked again then.
func (r *Replica) TransferLeadership(ctx context.Context, to uint64) error {
	st, err := r.Status(ctx)
	if err != nil {
		return err
	}
	switch role(st, to) {
	case "":
		return fmt.Errorf("%w: %d", ErrNoMember, to)
	case "learner":
		return fmt.Errorf("%w: member %d", ErrLearner, to)
	}
	timeout := time.Duration(r.opt.ElectionTicks) * r.opt.TickInterval
	for {
		// A member that stopped leading meanwhile may be seeing the
		// transfer happen: it waits one more timeout before it gives up.
		err := r.sendConf(ctx, &confPropose{transfer: to})
		if err != nil && !errors.Is(err, ErrNotLeader) {
			return err
		}
		for deadline := time.Now().Add(timeout); time.Now().Before(deadline); {
			if r.Leader() == to {
				return nil
			}
			select {
			case <-time.After(r.opt.TickInterval):
			case <-ctx.Done():
				return fmt.Errorf("replica: leadership did not move to member %d: %w", to, ctx.Err())
			}
		}
		if err != nil {
			return err
		}
	}
}

// change proposes one change of member id and waits until it is applied.
func (r *Replica) change(ctx context.Context, typ raftpb.ConfChangeType, id uint64, info []byte) error {
	if !r.changing.CompareAndSwap(false, true) {
		return ErrChangeInProgress
	}
	defer r.changing.Store(false)
	p := &proposal{id: r.newID(), applied: make(chan struct{})}
	data := append([]byte{confContextVersion}, binary.AppendUvarint(nil, p.id)...)
	cc := raftpb.ConfChangeV2{Changes: []raftpb.ConfChangeSingle{{Type: typ, NodeID: id}}, Context: append(data, info...)}
	if err := r.sendConf(ctx, &confPropose{p: p, cc: cc}); err != nil {
		return err
	}
	return r.await(ctx, p) // p is proposed: giving up takes it from waiters
}

// sendConf hands c to the raft loop and waits for it to be proposed.
func (r *Replica) sendConf(ctx context.Context, c *confPropose) error {
	errc := make(chan error, 1)
	select {
	case r.confc <- confRequest{c, errc}:
	case <-r.exited:
		return errStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-errc:
		return err
	case <-r.exited:
		return errStopped
	}
}

// confRequest is a confPropose with where the raft loop says if it was
// proposed.
type confRequest struct {
	c   *confPropose
	err chan error
}

// proposeConf proposes a change, or transfers leadership, on the raft
// loop. A proposed change's waiter is completed when its entry is applied.
func (l *loop) proposeConf(req confRequest) {
	switch {
	case l.lead != l.r.id:
		req.err <- ErrNotLeader
	case req.c.p == nil:
		l.rn.TransferLeader(req.c.transfer)
		req.err <- nil
	default:
		l.r.waiters.add(req.c.p)
		req.c.p.state.Store(proposed)
		if err := l.rn.ProposeConfChange(req.c.cc); err != nil {
			l.r.waiters.take(req.c.p.id)
			req.err <- fmt.Errorf("%w: raft refused the change: %w", ErrNotLeader, err)
			return
		}
		req.err <- nil
	}
}

// applyConf applies a committed change to raft, on the raft loop.
func (l *loop) applyConf(ca confApply) {
	ca.done <- *l.rn.ApplyConfChange(ca.cc)
}

// applyConfEntry applies a committed configuration change entry, on the
// apply thread: raft takes it on the raft loop, and the replica records
// the new configuration and the member's info, and completes the change's
// waiter. A member removed from the group stops.
func (r *Replica) applyConfEntry(e *raftpb.Entry) error {
	cc, err := decodeConfChange(e)
	if err != nil {
		return errorf("entry %d (term %d) is a configuration change that cannot be decoded: %w", e.Index, e.Term, err)
	}
	ca := confApply{cc: cc, done: make(chan raftpb.ConfState, 1)}
	select {
	case r.confApplyc <- ca:
	case <-r.dead:
		return errStopped
	}
	var cs raftpb.ConfState
	select {
	case cs = <-ca.done:
	case <-r.dead:
		return errStopped
	}
	r.conf = cs
	id, info := confContext(cc.Context)
	r.recordMembers(cc, info)
	r.opt.Logger.Info("configuration changed", "member", r.id, "index", e.Index, "change", cc.String(),
		"voters", cs.Voters, "learners", cs.Learners)
	if p := r.waiters.take(id); p != nil && id != 0 {
		close(p.applied)
	}
	if !slices.Contains(cs.Voters, r.id) && !slices.Contains(cs.Learners, r.id) {
		r.applied.Store(e.Index)
		return ErrRemoved
	}
	return nil
}

// recordMembers updates the members' info after cc: a member added gets
// info, one removed is forgotten.
func (r *Replica) recordMembers(cc raftpb.ConfChangeV2, info []byte) {
	r.membersMu.Lock()
	defer r.membersMu.Unlock()
	m := maps.Clone(r.members)
	if m == nil {
		m = make(map[uint64][]byte)
	}
	for _, c := range cc.Changes {
		switch c.Type {
		case raftpb.ConfChangeRemoveNode:
			m[c.NodeID] = []byte(retired)
		default:
			if len(info) > 0 {
				m[c.NodeID] = info
			}
		}
	}
	r.members = m
}

// setMembers replaces the members' info.
func (r *Replica) setMembers(m map[uint64][]byte) {
	r.membersMu.Lock()
	defer r.membersMu.Unlock()
	r.members = m
}

// Members returns what is known of each member (Options.Members, and the
// info of each change since): member id to info. The map is the caller's.
func (r *Replica) Members() map[uint64][]byte {
	r.membersMu.Lock()
	defer r.membersMu.Unlock()
	m := maps.Clone(r.members)
	maps.DeleteFunc(m, func(_ uint64, info []byte) bool { return string(info) == retired })
	return m
}

// decodeConfChange decodes a configuration change entry of either type.
func decodeConfChange(e *raftpb.Entry) (raftpb.ConfChangeV2, error) {
	if e.Type == raftpb.EntryConfChange {
		var cc raftpb.ConfChange
		err := cc.Unmarshal(e.Data)
		return cc.AsV2(), err
	}
	var cc raftpb.ConfChangeV2
	err := cc.Unmarshal(e.Data)
	return cc, err
}

// confContext returns the proposal id and member info of a change's
// context; a context of another shape has neither.
func confContext(ctx []byte) (uint64, []byte) {
	if len(ctx) < 2 || ctx[0] != confContextVersion {
		return 0, nil
	}
	id, n := binary.Uvarint(ctx[1:])
	if n <= 0 {
		return 0, nil
	}
	return id, ctx[1+n:]
}

// Status returns raft's status of this member (with each member's progress
// when it leads), taken on the raft loop.
func (r *Replica) Status(ctx context.Context) (raft.Status, error) {
	c := make(chan raft.Status, 1)
	select {
	case r.statusc <- c:
	case <-r.exited:
		return raft.Status{}, errStopped
	case <-ctx.Done():
		return raft.Status{}, ctx.Err()
	}
	select {
	case st := <-c:
		return st, nil
	case <-r.exited:
		return raft.Status{}, errStopped
	}
}

// membersSection is the snapshot section that holds the members' info,
// and the ids of removed members (with the info "\x00retired"):
//
//	count uvarint, then count x (member id uvarint, info length uvarint, info)
const membersSection = "members"

// encodeMembers encodes m as the members section, in member order.
func encodeMembers(m map[uint64][]byte) []byte {
	b := binary.AppendUvarint(nil, uint64(len(m)))
	for _, id := range slices.Sorted(maps.Keys(m)) {
		b = binary.AppendUvarint(b, id)
		b = binary.AppendUvarint(b, uint64(len(m[id])))
		b = append(b, m[id]...)
	}
	return b
}

// decodeMembers decodes a members section.
func decodeMembers(b []byte) (map[uint64][]byte, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)) {
		return nil, errors.New("replica: bad member count in the snapshot's members section")
	}
	b = b[w:]
	m := make(map[uint64][]byte, n)
	for range n {
		id, w1 := binary.Uvarint(b)
		if w1 <= 0 {
			return nil, errors.New("replica: bad member id in the snapshot's members section")
		}
		l, w2 := binary.Uvarint(b[w1:])
		if w2 <= 0 || l > uint64(len(b)-w1-w2) {
			return nil, errors.New("replica: bad member info in the snapshot's members section")
		}
		m[id] = slices.Clone(b[w1+w2 : w1+w2+int(l)])
		b = b[w1+w2+int(l):]
	}
	if len(b) != 0 {
		return nil, errors.New("replica: trailing bytes in the snapshot's members section")
	}
	return m, nil
}

// membersOf returns the members section of a snapshot's sections, or an
// empty map if it has none.
func membersOf(sections []snap.Section) (map[uint64][]byte, error) {
	for _, s := range sections {
		if s.Name == membersSection {
			return decodeMembers(s.Data)
		}
	}
	return map[uint64][]byte{}, nil
}

// MemberInfo returns what is known of member id (see Members), or nil. The
// slice must not be modified. It is cheap: no copy is made.
func (r *Replica) MemberInfo(id uint64) []byte {
	r.membersMu.Lock()
	defer r.membersMu.Unlock()
	if info := r.members[id]; string(info) != retired {
		return info
	}
	return nil
}
