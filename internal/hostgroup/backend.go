// Package hostgroup serves one raft group run by a multiraft.Host to
// clients: a server.Backend whose writes are proposed to the group and
// whose state is the group's StateMachine, a store. A node that hosts
// several groups runs one Host and, for each of its groups, a
// StateMachine, a Backend and a server.Server on the member's own client
// port (see package node).
//
// # Writes
//
// Apply checks the batch, waits for the group to have a leader (at most
// Config.LeaderWait), and, at the leader, proposes one entry (package
// batchentry: the leader's clock, and an id, unique in the group's log
// (newID), that names the waiting call on this node) with Host.Propose. The StateMachine applies each entry on the
// group's apply goroutine and, on the node that proposed it, calls the
// caller's done after each of the batch's entries, before the next takes
// effect. A member that does not lead refuses the write with
// replica.ErrNotLeader (a server redirects before that: see Redirect), and
// errors are those of package replica, which the server maps to replies.
//
// # Reads
//
// ReadBarrier is Host.ReadBarrier (raft's read index), tried again while
// the group has no leader or the leader is lost meanwhile, for at most
// LeaderWait.
//
// # Membership
//
// FLINT.MEMBER ADD, REMOVE and TRANSFER, at the group's leader, are the
// Host's AddMember, RemoveMember and TransferLeadership. A member is added
// with its addresses, "client@peer", as its info, which the change's
// entry carries to every member (Host.MemberInfo): each node points its
// transport at the peer address (package node, through
// multiraft.Config.OnMember), and Redirect and ClusterView give the
// client address. The group's first members' client addresses are
// Config.Members'. A node that joins an existing group runs it with
// AddGroup given the group's first members, without itself.
// Snapshots are the Host's to take (StateMachine.Snapshot and Restore
// write and read them).
package hostgroup

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/flintkv/flint/internal/batchentry"
	"github.com/flintkv/flint/internal/multiraft"
	"github.com/flintkv/flint/internal/replica"
	"github.com/flintkv/flint/internal/server"
	"github.com/flintkv/flint/internal/store"
)

// Config configures a Backend.
type Config struct {
	Host  *multiraft.Host
	Group uint64 // the group's id on the Host
	Self  uint64 // this node's id, its member id in the group
	// Members is each member's client address, by member (node) id, as
	// the node was started with: the group's first members', and this
	// node's. Those of members added since are their infos (see the
	// package doc).
	Members map[uint64]string
	// LeaderWait is how long writes and reads wait while the group has no
	// leader before they fail with replica.ErrNoLeader; default 2 s (two
	// election timeouts of the default clock).
	LeaderWait time.Duration
}

// maxBatchBytes is the longest batch Apply takes, as a replica's.
const maxBatchBytes = 512 << 20

// Backend is a server.Backend (and server.Cluster and server.Positioner)
// of one group on a Host. Its methods are safe for concurrent use.
type Backend struct {
	cfg  Config
	sm   *StateMachine
	next atomic.Uint64 // the counter of newID
}

var (
	_ server.Backend    = (*Backend)(nil)
	_ server.Cluster    = (*Backend)(nil)
	_ server.Positioner = (*Backend)(nil)
	_ server.Membership = (*Backend)(nil)
)

// New returns the backend of group cfg.Group, whose state machine, added
// to cfg.Host with AddGroup, is sm.
func New(cfg Config, sm *StateMachine) *Backend {
	if cfg.LeaderWait <= 0 {
		cfg.LeaderWait = 2 * time.Second
	}
	b := &Backend{cfg: cfg, sm: sm}
	b.next.Store(rand.Uint64())
	return b
}

// newID returns a new call id: this node's id in the high 32 bits, so that
// no two nodes' ids meet in the group's log (every member's StateMachine
// completes the call waiting on it for an entry's id), and a counter in
// the low ones, which starts at a random value at every start, so that
// entries proposed before a restart, applied again as the node replays
// its log or catches up, never complete a new caller.
func (b *Backend) newID() uint64 { return b.cfg.Self<<32 | b.next.Add(1)&(1<<32-1) }

// Store implements server.Backend.
func (b *Backend) Store() *store.Store { return b.sm.Store() }

// Applied implements server.Positioner.
func (b *Backend) Applied() uint64 { return b.sm.Applied() }

// PersistenceInfo implements server.PersistenceInfo: the group's writes
// are durable, the node's shared log fsyncing each batch before it is
// acknowledged. Its snapshots are the Host's, on the Host's schedule.
func (b *Backend) PersistenceInfo() []string {
	return []string{"fsync_policy:always", fmt.Sprintf("applied_index:%d", b.Applied()), "rdb_bgsave_in_progress:0"}
}

// Errors of a stopped host, as a replica's.
var errStopped = fmt.Errorf("%w: %w", replica.ErrOutcomeUnknown, replica.ErrStopped)

// Apply implements server.Backend: see the package doc.
func (b *Backend) Apply(ctx context.Context, batch []byte, done func(i int, res store.Result)) error {
	switch {
	case len(batch) > maxBatchBytes:
		return replica.ErrTooLarge
	case len(batch) == 0:
		return nil
	}
	if err := store.CheckBatch(batch); err != nil {
		return fmt.Errorf("hostgroup: batch refused, not logged: %w", err)
	}
	lead, err := b.waitLeader(ctx, time.Now().Add(b.cfg.LeaderWait))
	if err != nil {
		return err
	}
	if lead != b.cfg.Self {
		return replica.ErrNotLeader
	}
	id := b.newID()
	c := &call{done: done, over: make(chan struct{})}
	b.sm.add(id, c)
	data := batchentry.AppendHeader(make([]byte, 0, len(batch)+32), time.Now().UnixNano(), 1)
	_, err = b.cfg.Host.Propose(ctx, b.cfg.Group, batchentry.Append(data, id, batch))
	if err == nil {
		return c.err // the host answers once the state machine applied it
	}
	if b.sm.take(id) == nil {
		// The state machine took the call: it is applying its batch, and
		// calling done, or it has.
		<-c.over
		return c.err
	}
	switch {
	case errors.Is(err, multiraft.ErrNotLeader):
		return replica.ErrNotLeader // nothing was proposed
	case errors.Is(err, multiraft.ErrStopped), errors.Is(err, multiraft.ErrNoGroup):
		return errStopped
	}
	return fmt.Errorf("%w: %w", replica.ErrOutcomeUnknown, err)
}

// leaderPoll is how often a call waiting for a leader looks.
const leaderPoll = 5 * time.Millisecond

// waitLeader returns the group's leader once one is known, or
// replica.ErrNoLeader once deadline passes or ctx ends first.
func (b *Backend) waitLeader(ctx context.Context, deadline time.Time) (uint64, error) {
	for {
		if lead := b.cfg.Host.Leader(b.cfg.Group); lead != 0 {
			return lead, nil
		}
		select {
		case <-b.cfg.Host.Done():
			return 0, errStopped
		default:
		}
		if !time.Now().Before(deadline) {
			return 0, replica.ErrNoLeader
		}
		t := time.NewTimer(leaderPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, fmt.Errorf("%w: %w", replica.ErrNoLeader, ctx.Err())
		case <-t.C:
		}
	}
}

// ReadBarrier implements server.Backend: see the package doc.
func (b *Backend) ReadBarrier(ctx context.Context) error {
	deadline := time.Now().Add(b.cfg.LeaderWait)
	for {
		if _, err := b.waitLeader(ctx, deadline); err != nil {
			return err
		}
		// A read index asked of a leader that is lost meanwhile is never
		// answered: each try waits half of LeaderWait at most.
		tctx, cancel := context.WithTimeout(ctx, b.cfg.LeaderWait/2)
		err := b.cfg.Host.ReadBarrier(tctx, b.cfg.Group)
		cancel()
		switch {
		case err == nil:
			return nil
		case errors.Is(err, multiraft.ErrStopped), errors.Is(err, multiraft.ErrNoGroup):
			return errStopped
		case ctx.Err() != nil:
			return fmt.Errorf("%w: %w", replica.ErrNoLeader, ctx.Err())
		case !time.Now().Before(deadline):
			return replica.ErrNoLeader
		}
	}
}

// Redirect implements server.Cluster: the leader's client address, if
// another member leads.
func (b *Backend) Redirect() (string, bool) {
	lead := b.cfg.Host.Leader(b.cfg.Group)
	if lead == 0 || lead == b.cfg.Self {
		return "", false
	}
	addr := b.clientAddr(lead)
	return addr, addr != ""
}

// clientAddr returns member id's client address: its info's, or, for a
// member added without one (a first member), Config.Members'; "" if
// neither names it.
func (b *Backend) clientAddr(id uint64) string {
	if info, ok := b.cfg.Host.MemberInfo(b.cfg.Group)[id]; ok {
		client, _, _ := strings.Cut(string(info), "@")
		return client
	}
	return b.cfg.Members[id]
}

// ClusterView implements server.Cluster: the members of the group's
// configuration, voters and learners, with their client addresses (see
// clientAddr); if the group stopped here (this node was removed from it),
// none.
func (b *Backend) ClusterView() server.ClusterView {
	v := server.ClusterView{Self: b.cfg.Self, Leader: b.cfg.Host.Leader(b.cfg.Group), Applied: b.sm.Applied()}
	st, err := b.cfg.Host.Status(b.cfg.Group)
	if err != nil {
		return v
	}
	v.Term, v.Commit = st.Term, st.Commit
	for id := range st.Config.Voters.IDs() {
		v.Members = append(v.Members, server.ClusterMember{ID: id, Addr: b.clientAddr(id), Voter: true, Match: st.Progress[id].Match})
	}
	for id := range st.Config.Learners {
		v.Members = append(v.Members, server.ClusterMember{ID: id, Addr: b.clientAddr(id), Match: st.Progress[id].Match})
	}
	slices.SortFunc(v.Members, func(x, y server.ClusterMember) int { return cmp.Compare(x.ID, y.ID) })
	return v
}

// AddMember implements server.Membership at the group's leader: node id
// joins as a learner, is caught up, then promoted (Host.AddMember), with
// addrs, its client@peer, as its info (see the package doc). A member
// already (a voter, or a learner an earlier ADD left) keeps the addresses
// it has: a wrong peer address would cut it off.
func (b *Backend) AddMember(ctx context.Context, id uint64, addrs string) error {
	client, peer, err := parseAddrs(addrs)
	if err != nil {
		return err
	}
	st, err := b.cfg.Host.Status(b.cfg.Group)
	if err != nil {
		return changeErr(err)
	}
	if st.Lead != b.cfg.Self {
		return replica.ErrNotLeader
	}
	return changeErr(b.cfg.Host.AddMember(ctx, b.cfg.Group, id, []byte(client+"@"+peer)))
}

// parseAddrs parses a member's addresses: host:port@peerport, the peer's
// host the client's (as Redis's ip:port@cport), or host:port@peerhost:peerport.
func parseAddrs(addrs string) (client, peer string, err error) {
	client, peer, _ = strings.Cut(addrs, "@")
	host, _, err := net.SplitHostPort(client)
	if err == nil && !strings.Contains(peer, ":") {
		peer = net.JoinHostPort(host, peer)
	}
	if err == nil {
		_, _, err = net.SplitHostPort(peer)
	}
	if err != nil {
		return "", "", fmt.Errorf("hostgroup: member addresses %q: want host:port@peerport or host:port@peerhost:peerport: %w", addrs, err)
	}
	return client, peer, nil
}

// RemoveMember implements server.Membership at the group's leader
// (Host.RemoveMember): the removed member stops the group.
func (b *Backend) RemoveMember(ctx context.Context, id uint64) error {
	return changeErr(b.cfg.Host.RemoveMember(ctx, b.cfg.Group, id))
}

// TransferLeadership implements server.Membership at the group's leader
// (Host.TransferLeadership).
func (b *Backend) TransferLeadership(ctx context.Context, id uint64) error {
	return changeErr(b.cfg.Host.TransferLeadership(ctx, b.cfg.Group, id))
}

// changeErr maps a Host's membership change error to package replica's.
func changeErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, multiraft.ErrNotLeader):
		return replica.ErrNotLeader
	case errors.Is(err, multiraft.ErrStopped), errors.Is(err, multiraft.ErrNoGroup), errors.Is(err, multiraft.ErrRemoved):
		return errStopped
	case errors.Is(err, multiraft.ErrUnknownState):
		return fmt.Errorf("%w: %w", replica.ErrOutcomeUnknown, err)
	}
	return err
}
