package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/flintkv/flint/internal/hostgroup"
	"github.com/flintkv/flint/internal/multiraft"
	"github.com/flintkv/flint/internal/server"
	"github.com/flintkv/flint/internal/shardmap"
)

// A hosting node starts groups while it runs (FLINT.GROUP START, which
// `flint cluster add-group --hosted` sends each new member's node) and
// records them, so that it hosts them again when restarted, in
// <dir>/GROUPS, a JSON object:
//
//	{"version": 1, "groups": [{"id": 3, "members": {"1": "127.0.0.1:7301", "2": "127.0.0.1:7302"}}]}
//
// version is 1; groups lists the groups started so, in the order started,
// each with its members' client addresses by node id, as a --host-groups
// entry gives them. The file is replaced whole (written to GROUPS.tmp,
// fsynced, renamed, the directory fsynced) before the group starts, so a
// group that ever ran here is in it. A group of --host-groups is the
// flags' on every start, also if the file lists it.

const (
	groupsFile    = "GROUPS"
	groupsVersion = 1
)

// startedGroups is the GROUPS file's content.
type startedGroups struct {
	Version int            `json:"version"`
	Groups  []startedGroup `json:"groups"`
}

type startedGroup struct {
	ID      uint64            `json:"id"`
	Members map[uint64]string `json:"members"`
}

// readStarted returns the groups that the GROUPS file in dir lists: none
// if there is no file.
func readStarted(dir string) ([]HostedGroup, error) {
	b, err := os.ReadFile(filepath.Join(dir, groupsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var f startedGroups
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s is damaged: %w", filepath.Join(dir, groupsFile), err)
	}
	if f.Version != groupsVersion {
		return nil, fmt.Errorf("%s is of version %d; this flint reads version %d", filepath.Join(dir, groupsFile), f.Version, groupsVersion)
	}
	gs := make([]HostedGroup, len(f.Groups))
	for i, g := range f.Groups {
		gs[i] = HostedGroup{ID: g.ID, Members: g.Members}
	}
	return gs, nil
}

// writeStarted replaces the GROUPS file in dir with one that lists gs,
// durably.
func writeStarted(dir string, gs []HostedGroup) error {
	f := startedGroups{Version: groupsVersion, Groups: make([]startedGroup, len(gs))}
	for i, g := range gs {
		f.Groups[i] = startedGroup{ID: g.ID, Members: g.Members}
	}
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	name := filepath.Join(dir, groupsFile)
	tmp, err := os.Create(name + ".tmp")
	if err != nil {
		return err
	}
	_, err = tmp.Write(append(b, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), name)
	}
	if err == nil {
		err = syncDir(dir)
	}
	return err
}

// withStarted returns the groups of the flags, then those of started
// that the flags do not list.
func withStarted(flags, started []HostedGroup) []HostedGroup {
	gs := slices.Clone(flags)
	for _, g := range started {
		if !slices.ContainsFunc(flags, func(f HostedGroup) bool { return f.ID == g.ID }) {
			gs = append(gs, g)
		}
	}
	return gs
}

// hostedNode is a running node that hosts groups: its Host and a server
// for each of its members, which StartGroup adds to while it runs.
type hostedNode struct {
	cfg    Config
	h      *multiraft.Host
	roles  *hostRoles
	follow *follower       // the node's poll of the managers, which keeps every member's view of the map
	ctx    context.Context // ends when the node shuts down
	errc   chan error      // a server's failure, the first (see fail)
	// learned are the nodes added to its groups since it started, which
	// its flags may not name.
	learned *learnedNodes

	mu      sync.Mutex
	srvs    []*server.Server
	groups  map[uint64]map[uint64]string // the members of each group it hosts, or is starting
	started []HostedGroup                // as the GROUPS file lists them
	closed  bool                         // shutting down: it starts no more
}

// member makes the member of group g whose client address is addr: its
// state machine, on the Host, its backend and its server, and returns the
// server and its view of the map, which the caller adds to n.follow. The
// group is marked hosted.
func (n *hostedNode) member(g HostedGroup, addr string) (*server.Server, *shardView, error) {
	self := n.cfg.Cluster.ID
	opt := n.cfg.Replica.Store
	opt.Group = g.ID // in the client ids its sessions get: unique in the cluster
	sm := hostgroup.NewStateMachine(opt)
	if err := n.h.AddGroup(g.ID, g.first(self), sm); err != nil {
		return nil, nil, fmt.Errorf("node: group %d: %w", g.ID, err)
	}
	b := hostgroup.New(hostgroup.Config{Host: n.h, Group: g.ID, Self: self, Members: g.Members,
		LeaderWait: 2 * n.cfg.Cluster.electionTimeout()}, sm)
	v := newShardView(g.ID, n.cfg.Shard.Managers)
	scfg := n.cfg.Server
	scfg.Addr = addr
	n.roles.host(g.ID)
	return server.New(scfg, hostedMember{b, v, n.roles, n}), v, nil
}

// StartGroup implements server.GroupHost: it checks the group, listens on
// this node's member's client address, records the group in the GROUPS
// file, starts it on the Host, and serves its clients, following the
// managers' map in the node's poll (n.follow), which costs no more for
// the groups started. What it did is undone if a later step fails.
func (n *hostedNode) StartGroup(id uint64, members map[uint64]string) (err error) {
	self := n.cfg.Cluster.ID
	addr, ok := members[self]
	switch {
	case id > shardmap.MaxGroup:
		return fmt.Errorf("group %d: a group id is 1 to %d", id, shardmap.MaxGroup)
	case !ok:
		return fmt.Errorf("this node (%d) is not among group %d's members", self, id)
	}
	for m := range members {
		if !n.knows(m) {
			return fmt.Errorf("node %d is not a node of this cluster (of this node's --host-nodes, or added to a group it hosts)", m)
		}
	}
	g := HostedGroup{ID: id, Members: members}
	if err := n.reserve(g); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			n.release(id)
		}
	}()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("group %d cannot listen for clients at %s: %w", id, addr, err)
	}
	defer func() {
		if err != nil {
			ln.Close()
		}
	}()
	if err := n.record(func(gs []HostedGroup) []HostedGroup { return append(gs, g) }); err != nil {
		return fmt.Errorf("group %d not started: cannot record it: %w", id, err)
	}
	s, v, err := n.member(g, addr)
	if err != nil {
		if uerr := n.record(func(gs []HostedGroup) []HostedGroup { return gs[:len(gs)-1] }); uerr != nil {
			n.cfg.Logger.Error("cannot remove a group not started from the GROUPS file: the node will start it when restarted", "group", id, "err", uerr)
		}
		return err
	}
	n.follow.add(v) // before it serves, so that it has the map the node has at once
	if err := n.serve(s, ln); err != nil {
		return err // shutting down: the node stops the group with the others
	}
	n.cfg.Logger.Info("started a member of a new group", "group", id, "members", len(members), "addr", addr)
	return nil
}

// knows reports whether node id is a node of the cluster this node knows:
// itself, one its flags name, or one added to a group it hosts.
func (n *hostedNode) knows(id uint64) bool {
	c := n.cfg.Cluster
	return id == c.ID || slices.ContainsFunc(c.Members, func(m Member) bool { return m.ID == id }) || n.learned.has(id)
}

// ErrGroupRuns, in an error of StartGroup, says that the node runs the
// group already, with the members asked for: `flint cluster add-group`
// run again after a failure takes it for done.
var ErrGroupRuns = errors.New("runs on this node already, with these members")

// reserve marks group g as starting, unless the node hosts it, starts it
// already, or is shutting down.
func (n *hostedNode) reserve(g HostedGroup) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	old, runs := n.groups[g.ID]
	switch {
	case n.closed:
		return errors.New("the node is shutting down")
	case runs && maps.Equal(old, g.Members):
		return fmt.Errorf("group %d %w", g.ID, ErrGroupRuns)
	case runs:
		return fmt.Errorf("group %d runs on this node already, with other members", g.ID)
	}
	n.groups[g.ID] = g.Members
	return nil
}

// release forgets a group that failed to start.
func (n *hostedNode) release(id uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.groups, id)
}

// record rewrites the GROUPS file with change applied to the groups it
// lists; on failure the list is as before.
func (n *hostedNode) record(change func([]HostedGroup) []HostedGroup) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	gs := change(slices.Clone(n.started))
	if err := writeStarted(n.cfg.Dir, gs); err != nil {
		return err
	}
	n.started = gs
	return nil
}

// serve serves s's clients on ln, unless the node is shutting down.
func (n *hostedNode) serve(s *server.Server, ln net.Listener) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return errors.New("the node is shutting down")
	}
	n.srvs = append(n.srvs, s)
	go func() { n.fail(s.Serve(ln)) }()
	return nil
}

// fail reports err, a server's, unless it stopped for the shutdown; the
// node stops on the first.
func (n *hostedNode) fail(err error) {
	if !errors.Is(err, server.ErrServerClosed) {
		select {
		case n.errc <- err:
		default:
		}
	}
}

// shutdown makes the node start no more groups, and returns every server.
func (n *hostedNode) shutdown() []*server.Server {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	return n.srvs
}
