package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/multiraft"
	"github.com/flintkv/flint/internal/proctest"
	"github.com/flintkv/flint/internal/server"
	"github.com/flintkv/flint/internal/shardmap"
	"github.com/flintkv/flint/internal/slot"
	"github.com/flintkv/flint/internal/store"
	"github.com/flintkv/flint/internal/vfs"
	"github.com/flintkv/flint/internal/wal"
)

// dropAll is a transport.Sender to nodes that never answer.
type dropAll struct{}

func (dropAll) Send(to, group uint64, msgs []raftpb.Message) {}

func (dropAll) SendSnapshot(to, group uint64, m raftpb.Message, body io.ReadCloser, size int64) {
	body.Close()
}

// testHostedNode returns node 1 of nodes 1 to 3, running a Host with no
// group, its data directory dir; the test's end stops it.
func testHostedNode(t *testing.T, dir string) *hostedNode {
	lg, err := wal.OpenShared(vfs.NewMem(), "wal", wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := multiraft.New(multiraft.Config{Node: 1, Log: lg, Sender: dropAll{}, TickInterval: 5 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(context.Background())
	cfg := Config{Dir: dir, Logger: slog.New(slog.DiscardHandler), Server: server.DefaultConfig,
		Cluster: &ClusterConfig{ID: 1, Members: []Member{{ID: 1}, {ID: 2}, {ID: 3}}, TickInterval: 5 * time.Millisecond, ElectionTicks: 10},
		Shard:   &ShardConfig{Managers: []string{proctest.FreeAddr(t)}}}
	n := &hostedNode{cfg: cfg, h: h, roles: &hostRoles{h: h, self: 1}, follow: newFollower(), ctx: ctx, errc: make(chan error, 1),
		groups: map[uint64]map[uint64]string{}, learned: &learnedNodes{}}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		for _, s := range n.shutdown() {
			s.Shutdown(sctx)
		}
		cancel()
		h.Stop()
		lg.Close()
	})
	return n
}

// TestStartGroup starts a group on a running node: its member serves
// clients at once, the GROUPS file lists it, and the node's roles name it.
// Each bad start is refused with its reason and changes nothing: a group
// the node runs, a node not of the cluster, a group this node is no member
// of, a group id out of range, a client address in use. A node learned
// from a roster since the node started is of the cluster.
func TestStartGroup(t *testing.T) {
	dir := t.TempDir()
	n := testHostedNode(t, dir)
	addr := proctest.FreeAddr(t)
	if err := n.StartGroup(7, map[uint64]string{1: addr}); err != nil {
		t.Fatalf("StartGroup: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("the new member does not answer: %v", err)
	}
	if r := n.roles.Roles(); len(r) != 1 || r[0].Group != 7 {
		t.Fatalf("roles %+v, want group 7's member", r)
	}
	want, err := os.ReadFile(filepath.Join(dir, groupsFile))
	if err != nil || !strings.Contains(string(want), `{"version":1,"groups":[{"id":7,"members":{"1":"`+addr+`"}}]}`) {
		t.Fatalf("GROUPS file %q (%v)", want, err)
	}

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, bad := range []struct {
		id      uint64
		members map[uint64]string
		want    string
	}{
		{7, map[uint64]string{1: addr}, "group 7 runs on this node already, with these members"},
		{7, map[uint64]string{1: proctest.FreeAddr(t)}, "group 7 runs on this node already, with other members"},
		{8, map[uint64]string{1: proctest.FreeAddr(t), 9: proctest.FreeAddr(t)}, "node 9 is not a node of this cluster"},
		{8, map[uint64]string{2: proctest.FreeAddr(t), 3: proctest.FreeAddr(t)}, "this node (1) is not among group 8's members"},
		{70000, map[uint64]string{1: proctest.FreeAddr(t)}, "a group id is 1 to 65535"},
		{8, map[uint64]string{1: busy.Addr().String()}, "group 8 cannot listen for clients at"},
	} {
		if err := n.StartGroup(bad.id, bad.members); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("StartGroup(%d, %v): %v, want %q", bad.id, bad.members, err, bad.want)
		}
	}
	if got, err := os.ReadFile(filepath.Join(dir, groupsFile)); err != nil || string(got) != string(want) {
		t.Errorf("the refusals changed the GROUPS file: %q (%v), was %q", got, err, want)
	}
	if err := n.StartGroup(8, map[uint64]string{1: proctest.FreeAddr(t), 2: proctest.FreeAddr(t)}); err != nil {
		t.Fatalf("group 8, refused before, does not start: %v", err)
	}
	n.learned.add(9) // added to a group of node 1's since it started
	if err := n.StartGroup(9, map[uint64]string{1: proctest.FreeAddr(t), 9: proctest.FreeAddr(t)}); err != nil {
		t.Fatalf("group 9, with node 9 learned from a roster: %v", err)
	}
	gs, err := readStarted(dir)
	if err != nil || len(gs) != 3 || gs[0].ID != 7 || gs[1].ID != 8 || len(gs[1].Members) != 2 || gs[2].ID != 9 {
		t.Fatalf("readStarted = %+v, %v; want groups 7, 8 and 9", gs, err)
	}
	if all := withStarted([]HostedGroup{{ID: 8}, {ID: 1}}, gs); len(all) != 4 || all[0].Members != nil || all[2].ID != 7 || all[3].ID != 9 {
		t.Errorf("withStarted = %+v, want the flags' groups 8 and 1, then 7 and 9", all)
	}
}

// TestReadStartedRefuses: a GROUPS file of another version, or damaged,
// is refused with its name.
func TestReadStartedRefuses(t *testing.T) {
	for _, text := range []string{`{"version":2,"groups":[]}`, `{"version":1,"groups":[`} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, groupsFile), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := readStarted(dir); err == nil || !strings.Contains(err.Error(), groupsFile) {
			t.Errorf("readStarted of %s: %v, want an error naming the file", text, err)
		}
	}
	if gs, err := readStarted(t.TempDir()); err != nil || gs != nil {
		t.Errorf("readStarted without a file: %v, %v", gs, err)
	}
}

// countingListener counts the connections it accepted.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// testManager serves FLINT.MAP as an in-memory manager does, from the
// view it returns, on a listener that counts its clients; the test's end
// stops it.
func testManager(t *testing.T) (*shardView, *countingListener) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: ln}
	v := newShardView(0, nil)
	cfg := server.DefaultConfig
	cfg.Addr = ln.Addr().String()
	s := server.New(cfg, metaLocal{server.Local{S: store.New(store.Options{})}, v, cfg.Addr})
	go s.Serve(cl)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	return v, cl
}

// TestStartedGroupsFollowNodePoll starts two groups on a running node
// whose poll of the managers runs: each member has the map the node has
// at once (it answers MOVED for a slot of another group), and learns a
// later map that gives it slots (it serves them), while the manager sees
// one client still, the node's poll.
func TestStartedGroupsFollowNodePoll(t *testing.T) {
	mgr, ln := testManager(t)
	n := testHostedNode(t, t.TempDir())
	n.cfg.Shard.Managers, n.cfg.Shard.Poll = []string{ln.Addr().String()}, 10*time.Millisecond
	one := func(addr string) []shardmap.Member { return []shardmap.Member{{ID: 1, Addr: addr}} }
	a, b := proctest.FreeAddr(t), proctest.FreeAddr(t)
	first, err := shardmap.New(1, []shardmap.Group{{ID: 1, Slots: []shardmap.Range{{First: 0, Last: slot.Count - 1}}, Members: one(proctest.FreeAddr(t))},
		{ID: 7, Members: one(a)}, {ID: 8, Members: one(b)}})
	if err != nil {
		t.Fatal(err)
	}
	mgr.set(first, nil)
	go followManagers(n.ctx, n.cfg.Shard, n.cfg.Logger, n.follow)
	awaitReply := func(addr, want string) {
		t.Helper()
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		defer c.Close()
		var err error
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if err = c.Set(context.Background(), "k", "v", 0).Err(); fmt.Sprint(err) == want || err == nil && want == "" {
				return
			}
		}
		t.Fatalf("SET k at %s: %v, want %q", addr, err, want)
	}
	moved := fmt.Sprintf("MOVED %d %s", slot.Of([]byte("k")), first.Groups[0].Members[0].Addr)
	for id, addr := range map[uint64]string{7: a, 8: b} {
		if err := n.StartGroup(id, map[uint64]string{1: addr}); err != nil {
			t.Fatalf("StartGroup(%d): %v", id, err)
		}
		awaitReply(addr, moved)
	}
	next, err := first.WithMoves(nil, map[shardmap.Range]uint64{{First: 0, Last: 8191}: 7, {First: 8192, Last: slot.Count - 1}: 8})
	if err != nil {
		t.Fatal(err)
	}
	mgr.set(next, nil)
	owner := map[uint64]string{7: a, 8: b}[next.Owner(slot.Of([]byte("k"))).ID]
	awaitReply(owner, "")
	if got := ln.accepted.Load(); got != 1 {
		t.Errorf("the manager took %d connections, want 1: the node's poll", got)
	}
}
