package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/snap"
)

// A member's data directory holds its vote and its log; raft's safety
// rests on both surviving. A node whose directory was wiped, and which
// starts again under its old member id, has neither: it would vote for a
// candidate that lacks entries it had acknowledged, or twice in one term,
// and a leader could then be elected without an acknowledged write. Such
// a node must join as a new member, with a new id. Two checks catch one
// that does not:
//
//   - Its leader may remember what it acknowledged: a heartbeat then says
//     entries up to some index are committed with this member, and its log
//     ends before. Raft would panic; the replica stops with ErrDataLost
//     (see checkHeartbeat).
//   - Every data directory has an incarnation, a random number its node
//     makes with it (Options.Incarnation). A member registers its
//     incarnation with the group: once it knows a leader it proposes a
//     registration entry, again every registerTicks until one is applied.
//     The first registration of a member id is kept, in a table that every
//     member keeps in its snapshots. A later one of another incarnation is
//     a new directory under a used id: every member marks the id as lost,
//     and drops its votes and vote requests from then on; the member
//     itself, once it applies the group's record of its id (from the log
//     or a snapshot), stops with ErrDataLost.
//
// So a wiped member is told, and refused, within about the time it takes
// to commit its registration; until then its votes count. A member whose
// first directory never registered (it ran a version of Flint without
// registrations, and was not restarted since) is not caught this way.
//
// A registration entry's data is:
//
//	+-------------+------------------+-----------------------+
//	| kind (0x10) | member uvarint   | incarnation uint64 LE |
//	+-------------+------------------+-----------------------+
//
// where the kind byte stands where other entries have their version (1 or
// 2, see entry.go). Older versions of Flint cannot apply it.

const registrationKind = 0x10

// registerTicks is how often, in ticks, an unregistered member proposes
// its registration: a proposal forwarded to the leader may be lost.
const registerTicks = 10

// ErrDataLost stops a member whose data directory does not hold what its
// group knows it held: it was wiped, replaced, or restored from an older
// copy. Raft's guarantees need every member's vote and log to survive.
var ErrDataLost = errors.New("replica: this member's data directory does not hold what its group knows it held")

// errBadRegistration is a registration entry that does not decode.
var errBadRegistration = errors.New("replica: malformed registration entry; the log is damaged, or was written by a newer version of Flint")

// lostAdvice is what an operator does about ErrDataLost.
const lostAdvice = "the directory was wiped, replaced, or restored from an older copy. A member id is never reused: " +
	"start this node on an empty directory with a new --id and --join, add it with flint cluster add, " +
	"and remove member %d with flint cluster remove"

// incarnation is what the group knows of the data directory of one
// member.
type incarnation struct {
	id   uint64 // the incarnation that registered first
	lost bool   // another one registered since: the member's votes are refused
}

// registration returns the data of member's registration entry.
func registration(member, inc uint64) []byte {
	b := binary.AppendUvarint([]byte{registrationKind}, member)
	return binary.LittleEndian.AppendUint64(b, inc)
}

// isRegistration reports whether raft entry data is a registration.
func isRegistration(data []byte) bool { return len(data) > 0 && data[0] == registrationKind }

// applyRegistration records a committed registration. It returns
// ErrDataLost if the group knows this member by another incarnation.
func (r *Replica) applyRegistration(e *raftpb.Entry) error {
	member, n := binary.Uvarint(e.Data[1:])
	if n <= 0 || len(e.Data) != 1+n+8 {
		return fmt.Errorf("%w: entry %d (term %d)", errBadRegistration, e.Index, e.Term)
	}
	inc := binary.LittleEndian.Uint64(e.Data[1+n:])
	r.membersMu.Lock()
	known, ok := r.incarnations[member]
	switch {
	case !ok:
		r.setIncarnationLocked(member, incarnation{id: inc})
	case known.id != inc && !known.lost:
		r.setIncarnationLocked(member, incarnation{id: known.id, lost: true})
		what := "a member registered with a data directory the group does not know it by: its data was lost; " +
			"its votes are refused from now on. Remove it (flint cluster remove), and add the node as a new member"
		if member == r.id {
			what = "another data directory registered as this member: the group refuses this member's votes from now on; " +
				"replace it with a new member (flint cluster add, then flint cluster remove)"
		}
		r.opt.Logger.Error(what, "member", member, "incarnation", fmt.Sprintf("%016x", inc), "known", fmt.Sprintf("%016x", known.id), "index", e.Index)
	}
	r.membersMu.Unlock()
	return r.checkIncarnation()
}

// setIncarnationLocked records what is known of member's directory.
// r.membersMu is held.
func (r *Replica) setIncarnationLocked(member uint64, inc incarnation) {
	m := maps.Clone(r.incarnations)
	if m == nil {
		m = make(map[uint64]incarnation)
	}
	m[member] = inc
	r.incarnations = m
}

// checkIncarnation returns ErrDataLost if the group knows this member by
// another directory than this one, and marks it registered if by this one.
func (r *Replica) checkIncarnation() error {
	mine := r.opt.Incarnation
	r.membersMu.Lock()
	known, ok := r.incarnations[r.id]
	r.membersMu.Unlock()
	switch {
	case mine == 0 || !ok:
		return nil
	case known.id != mine:
		return fmt.Errorf("%w: the group knows member %d by another data directory (incarnation %016x; this one is %016x): "+lostAdvice,
			ErrDataLost, r.id, known.id, mine, r.id)
	}
	r.registered.Store(true)
	return nil
}

// LostMember reports whether the group refuses member's votes because
// another data directory than its own registered under its id: it lost
// its data, and must be replaced.
func (r *Replica) LostMember(member uint64) bool {
	r.membersMu.Lock()
	defer r.membersMu.Unlock()
	return r.incarnations[member].lost
}

// isVote reports whether t asks for a vote or gives one.
func isVote(t raftpb.MessageType) bool {
	return t == raftpb.MsgVote || t == raftpb.MsgVoteResp || t == raftpb.MsgPreVote || t == raftpb.MsgPreVoteResp
}

// register proposes this member's registration, on the raft loop, while
// the group has none of it and a leader is known; raft forwards a
// follower's proposal to the leader. A proposal that is lost is made
// again at the next call.
func (l *loop) register() {
	r := l.r
	if r.opt.Incarnation == 0 || r.registered.Load() || l.lead == raft.None {
		return
	}
	l.rn.Propose(registration(r.id, r.opt.Incarnation))
}

// checkHeartbeat returns ErrDataLost if m, a heartbeat of the current term
// or a later one, says that entries this member's log does not hold are
// committed with it: the leader sends a follower the commit index up to
// what that follower acknowledged, and a member acknowledges only what
// its log holds durably. Raft would panic on it.
func (l *loop) checkHeartbeat(m raftpb.Message) error {
	if m.Type != raftpb.MsgHeartbeat || m.Term < l.rn.BasicStatus().Term {
		return nil
	}
	last, err := l.r.storage.LastIndex()
	if err != nil || m.Commit <= last {
		return nil
	}
	return fmt.Errorf("%w: its leader, member %d, counts it as holding the log up to index %d, and it holds it up to %d: "+lostAdvice,
		ErrDataLost, m.From, m.Commit, last, l.r.id)
}

// incarnationsSection is the snapshot section that holds the table of
// incarnations, in the members section's layout, each value being the
// incarnation (uint64 LE) and 1 if the member is lost, else 0.
const incarnationsSection = "incarnations"

// encodeIncarnations encodes the table as the incarnations section.
func (r *Replica) encodeIncarnations() []byte {
	r.membersMu.Lock()
	defer r.membersMu.Unlock()
	m := make(map[uint64][]byte, len(r.incarnations))
	for id, inc := range r.incarnations {
		v := binary.LittleEndian.AppendUint64(nil, inc.id)
		if inc.lost {
			m[id] = append(v, 1)
		} else {
			m[id] = append(v, 0)
		}
	}
	return encodeMembers(m)
}

// restoreIncarnations replaces the table with a snapshot's (none if it
// has no such section), and checks this member's record.
func (r *Replica) restoreIncarnations(sections []snap.Section) error {
	t := map[uint64]incarnation{}
	for _, s := range sections {
		if s.Name != incarnationsSection {
			continue
		}
		m, err := decodeMembers(s.Data)
		if err != nil {
			return fmt.Errorf("%w (in the snapshot's incarnations section)", err)
		}
		for id, v := range m {
			if len(v) != 9 {
				return errors.New("replica: bad value in the snapshot's incarnations section")
			}
			t[id] = incarnation{id: binary.LittleEndian.Uint64(v), lost: v[8] == 1}
		}
	}
	r.membersMu.Lock()
	r.incarnations = t
	r.membersMu.Unlock()
	return r.checkIncarnation()
}
