package node_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/flintkv/flint/internal/node"
	"github.com/flintkv/flint/internal/replica"
	"github.com/flintkv/flint/internal/server"
	"github.com/flintkv/flint/internal/shardmap"
	"github.com/flintkv/flint/internal/transport/transporttest"
	"github.com/flintkv/flint/internal/vfs"
)

// A simCluster is a sharded cluster in one process: a meta group (the
// managers) and data groups, each of three members. Every member is a
// replica.Replica on its own vfs.Mem, its group's raft messages carried by
// the group's transporttest.Network (faults drawn from the test's seed),
// serving clients with a server.Server on 127.0.0.1, and following the
// cluster map through node.ShardedMember, as a `flint serve` member does.
// Members talk to each other's servers (the managers' polls, slot moves)
// over loopback TCP, which no fault touches.
type simCluster struct {
	t      *testing.T
	seed   uint64
	poll   time.Duration
	first  *shardmap.Map // the managers' map before the meta group holds one
	mu     sync.Mutex    // guards groups' map, not the groups
	groups map[uint64]*simGroup
}

// simGroup is one raft group of the cluster: id 0 is the meta group.
type simGroup struct {
	c       *simCluster
	id      uint64
	net     *transporttest.Network
	members []*simMember
	mu      sync.Mutex // serializes start, stop and crash of its members
}

// simMember is one member of a group, across its restarts.
type simMember struct {
	id   uint64 // raft id in its group, 1 to 3
	addr string // client address, the same across restarts
	fs   *vfs.Mem
	sw   *transporttest.Switch
	ep   *transporttest.Endpoint
	ln   net.Listener // before its first start

	// While up; nil when down.
	rep    *replica.Replica
	srv    *server.Server
	cancel context.CancelFunc
	served chan error
}

const simMembers = 3

// newSimCluster returns a cluster of managers and data groups 1..groups,
// the slots split evenly among the data groups, every member started.
func newSimCluster(t *testing.T, seed uint64, groups int) *simCluster {
	c := &simCluster{t: t, seed: seed, poll: 100 * time.Millisecond, groups: map[uint64]*simGroup{}}
	meta := c.newGroup(0)
	var data []*simGroup
	var members [][]shardmap.Member
	for g := 1; g <= groups; g++ {
		data = append(data, c.newGroup(uint64(g)))
		members = append(members, data[g-1].mapMembers())
	}
	var err error
	if c.first, err = shardmap.Even(members); err != nil {
		t.Fatal(err)
	}
	c.start(meta)
	for _, g := range data {
		c.start(g)
	}
	return c
}

// start starts every member of g, a new group, and adds it to the
// cluster's groups.
func (c *simCluster) start(g *simGroup) {
	g.mu.Lock()
	for _, mb := range g.members {
		if err := g.startLocked(mb); err != nil {
			g.mu.Unlock()
			c.t.Fatal(err)
		}
	}
	g.mu.Unlock()
	c.mu.Lock()
	c.groups[g.id] = g
	c.mu.Unlock()
}

// newGroup makes group id's members, listening but not started: start
// starts them.
func (c *simCluster) newGroup(id uint64) *simGroup {
	g := &simGroup{c: c, id: id, net: transporttest.NewNetwork(int64(c.seed + id))}
	for i := range simMembers {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			c.t.Fatal(err)
		}
		m := &simMember{id: uint64(i + 1), addr: ln.Addr().String(), fs: vfs.NewMem(), sw: &transporttest.Switch{}, ln: ln}
		m.ep = g.net.Register(m.id, m.sw)
		g.members = append(g.members, m)
	}
	c.t.Cleanup(func() { g.close() })
	return g
}

// group returns group id, or nil.
func (c *simCluster) group(id uint64) *simGroup {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.groups[id]
}

// all returns the groups, the meta group first, then in order of id.
func (c *simCluster) all() []*simGroup {
	c.mu.Lock()
	defer c.mu.Unlock()
	var gs []*simGroup
	for _, g := range c.groups {
		gs = append(gs, g)
	}
	slices.SortFunc(gs, func(a, b *simGroup) int { return int(a.id) - int(b.id) })
	return gs
}

// managers returns the managers' client addresses.
func (c *simCluster) managers() []string { return c.group(0).addrs() }

// close stops every member of g and its network.
func (g *simGroup) close() {
	for _, m := range g.members {
		g.stop(m, false)
		if m.ln != nil {
			m.ln.Close()
		}
	}
	g.net.Close()
}

// mapMembers returns the group's members as the map names them.
func (g *simGroup) mapMembers() []shardmap.Member {
	var ms []shardmap.Member
	for _, m := range g.members {
		ms = append(ms, shardmap.Member{ID: m.id, Addr: m.addr})
	}
	return ms
}

// addrs returns the group's members' client addresses.
func (g *simGroup) addrs() []string {
	var as []string
	for _, m := range g.members {
		as = append(as, m.addr)
	}
	return as
}

// restart starts member mb if it is down.
func (g *simGroup) restart(mb *simMember) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if mb.rep != nil {
		return nil
	}
	return g.startLocked(mb)
}

// startLocked opens mb's replica on its filesystem (recovering what it
// synced) and serves it at its address, as `flint serve` started again
// with the same flags would.
func (g *simGroup) startLocked(mb *simMember) error {
	opt := replica.Options{
		FS: mb.fs, Dir: "data", Logger: memberLog(g.id, mb.id),
		ID: mb.id, Peers: mb.ep, Members: map[uint64][]byte{},
		Incarnation:  g.id<<40 | mb.id<<32 | 1,
		TickInterval: 10 * time.Millisecond, ElectionTicks: 10,
		// Small, so that members install each other's snapshots, with
		// their sessions and slot-move records.
		SnapshotEntries: 500,
	}
	opt.Store.Group = g.id
	for _, o := range g.members {
		opt.Voters = append(opt.Voters, o.id)
		opt.Members[o.id] = []byte(o.addr + "@sim") // node's member info: client@peer
	}
	ln := mb.ln
	if ln == nil {
		var err error
		if ln, err = relisten(mb.addr); err != nil {
			return fmt.Errorf("group %d member %d: %w", g.id, mb.id, err)
		}
	}
	rep, err := replica.Open(opt)
	if err != nil {
		ln.Close()
		return fmt.Errorf("group %d member %d: %w", g.id, mb.id, err)
	}
	mb.ln = nil
	mb.sw.Set(rep)
	cfg := &node.ShardConfig{Group: g.id, Poll: g.c.poll}
	if g.id == 0 {
		cfg.Map = g.c.first
	} else {
		cfg.Managers = g.c.managers()
	}
	ctx, cancel := context.WithCancel(context.Background())
	backend := node.ShardedMember(ctx, cfg, rep, mb.id, memberLog(g.id, mb.id))
	srv := server.New(server.Config{Addr: mb.addr, Logger: memberLog(g.id, mb.id)}, backend)
	mb.rep, mb.srv, mb.cancel, mb.served = rep, srv, cancel, make(chan error, 1)
	go func() { mb.served <- srv.Serve(ln) }()
	return nil
}

// relisten listens on addr again, after its member's restart, trying for
// up to 5 s while the port is still held.
func relisten(addr string) (net.Listener, error) {
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var ln net.Listener
		if ln, err = net.Listen("tcp", addr); err == nil {
			return ln, nil
		}
	}
	return nil, fmt.Errorf("listening on %s again: %w", addr, err)
}

// stop stops member mb if it is up, as a process that is killed: its
// clients' connections close with no reply to what they wait for, and,
// with crash, its filesystem loses what it had not synced. It reports
// whether mb was up.
func (g *simGroup) stop(mb *simMember, crash bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if mb.rep == nil {
		return false
	}
	mb.sw.Set(nil)
	mb.cancel()
	dead, cancel := context.WithCancel(context.Background())
	cancel() // close every connection at once
	mb.srv.Shutdown(dead)
	<-mb.served
	mb.rep.Close()
	if crash {
		mb.fs.Crash()
	}
	mb.rep, mb.srv = nil, nil
	return true
}

// leader returns the member that believes it leads, or nil.
func (g *simGroup) leader() *simMember {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, mb := range g.members {
		if mb.rep != nil && mb.rep.Leader() == mb.id {
			return mb
		}
	}
	return nil
}

// memberLog is a member's logger: silent unless FLINT_TEST_LOG is set.
func memberLog(group, member uint64) *slog.Logger {
	if os.Getenv("FLINT_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).
		With("member", fmt.Sprintf("g%dm%d", group, member))
}
