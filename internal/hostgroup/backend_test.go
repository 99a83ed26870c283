package hostgroup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/multiraft"
	"github.com/flintkv/flint/internal/server"
	"github.com/flintkv/flint/internal/store"
	"github.com/flintkv/flint/internal/transport/transporttest"
	"github.com/flintkv/flint/internal/vfs"
	"github.com/flintkv/flint/internal/wal"
)

// These tests run 3 nodes in one process, each a Host of the same groups
// over an in-memory network, and each member of each group behind its own
// server on 127.0.0.1:0.

var quiet = slog.New(slog.DiscardHandler)

// router is a node's transport.Handler: its host, once started.
type router struct {
	h atomic.Pointer[multiraft.Host]
}

func (r *router) Receive(from, group uint64, msgs []raftpb.Message) {
	if h := r.h.Load(); h != nil {
		h.Receive(from, group, msgs)
	}
}

func (r *router) ReceiveSnapshot(uint64, uint64, raftpb.Message, io.Reader) error {
	return errors.New("no snapshots")
}

func (r *router) Unreachable(to, group uint64) {
	if h := r.h.Load(); h != nil {
		h.Unreachable(to, group)
	}
}

func (r *router) SnapshotDone(uint64, uint64, error) {}

// testNode is one node: its host, and its member of each group.
type testNode struct {
	id       uint64
	router   router
	log      *wal.Shared
	host     *multiraft.Host
	backends map[uint64]*Backend
	servers  []*server.Server
	learned  sync.Map // member -> the info multiraft.Config.OnMember last gave (of any group)
}

// testCluster is nodes 1..3, each a member of groups 1..groups; addrs[g][n]
// is node n's client address for group g.
type testCluster struct {
	net   *transporttest.Network
	nodes []*testNode
	addrs map[uint64]map[uint64]string
}

func startCluster(t *testing.T, groups int) *testCluster {
	c := &testCluster{net: transporttest.NewNetwork(1), addrs: map[uint64]map[uint64]string{}}
	lns := map[uint64]map[uint64]net.Listener{}
	for g := uint64(1); g <= uint64(groups); g++ {
		c.addrs[g], lns[g] = map[uint64]string{}, map[uint64]net.Listener{}
		for n := uint64(1); n <= 3; n++ {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			lns[g][n], c.addrs[g][n] = ln, ln.Addr().String()
		}
	}
	for n := uint64(1); n <= 3; n++ {
		c.startNode(t, n, []uint64{1, 2, 3}, lns)
	}
	t.Cleanup(func() {
		for _, nd := range c.nodes {
			c.stop(nd)
		}
		c.net.Close()
	})
	return c
}

// startNode starts node n, a member of each group of lns, whose first
// members are first, serving group g's clients on lns[g][n].
func (c *testCluster) startNode(t *testing.T, n uint64, first []uint64, lns map[uint64]map[uint64]net.Listener) *testNode {
	nd := &testNode{id: n, backends: map[uint64]*Backend{}}
	ep := c.net.Register(n, &nd.router)
	log, err := wal.OpenShared(vfs.NewMem(), "wal", wal.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	nd.log = log
	nd.host = multiraft.New(multiraft.Config{Node: n, Log: log, Sender: ep, TickInterval: 10 * time.Millisecond, Logger: quiet,
		OnMember: func(_, node uint64, info []byte) { nd.learned.Store(node, string(info)) }})
	for g := uint64(1); g <= uint64(len(lns)); g++ {
		sm := NewStateMachine(store.Options{})
		if err := nd.host.AddGroup(g, first, sm); err != nil {
			t.Fatal(err)
		}
		b := New(Config{Host: nd.host, Group: g, Self: n, Members: maps.Clone(c.addrs[g]), LeaderWait: time.Second}, sm)
		srv := server.New(server.Config{Logger: quiet}, b)
		go srv.Serve(lns[g][n])
		nd.backends[g], nd.servers = b, append(nd.servers, srv)
	}
	nd.router.h.Store(nd.host)
	c.nodes = append(c.nodes, nd)
	return nd
}

// stop stops node nd's servers and host.
func (c *testCluster) stop(nd *testNode) {
	if nd.host == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range nd.servers {
		s.Shutdown(ctx)
	}
	nd.router.h.Store(nil)
	nd.host.Stop()
	nd.log.Close()
	nd.host = nil
}

// leader waits up to 10 s for a node that every running node takes for
// group g's leader, and returns it.
func (c *testCluster) leader(t *testing.T, g uint64) *testNode {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var lead uint64
		agree := true
		for _, nd := range c.nodes {
			if nd.host == nil {
				continue
			}
			l := nd.host.Leader(g)
			agree = agree && l != 0 && (lead == 0 || l == lead)
			lead = l
		}
		if agree && lead != 0 && c.nodes[lead-1].host != nil {
			return c.nodes[lead-1]
		}
	}
	for _, nd := range c.nodes {
		if nd.host != nil {
			t.Logf("node %d sees %d lead", nd.id, nd.host.Leader(g))
		}
	}
	t.Fatalf("group %d elected no leader that every node knows", g)
	return nil
}

func client(t *testing.T, addr string) *redis.Client {
	rc := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 10 * time.Second})
	t.Cleanup(func() { rc.Close() })
	return rc
}

// TestWritesReadsAndMoved writes to each of 3 groups at its leader, with
// pipelined reads among the writes, reads every key back at the leader
// and, after READONLY, at each follower, and sees a follower answer a
// write MOVED to the leader's address.
func TestWritesReadsAndMoved(t *testing.T) {
	c := startCluster(t, 3)
	ctx := context.Background()
	for g := uint64(1); g <= 3; g++ {
		lead := c.leader(t, g)
		rc := client(t, c.addrs[g][lead.id])
		pipe := rc.Pipeline()
		var gets []*redis.StringCmd
		for i := range 20 {
			pipe.Set(ctx, fmt.Sprintf("g%d-k%d", g, i), fmt.Sprint(i), 0)
			gets = append(gets, pipe.Get(ctx, fmt.Sprintf("g%d-k%d", g, i)))
		}
		pipe.Incr(ctx, "counter")
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatalf("group %d: %v", g, err)
		}
		for i, get := range gets {
			if get.Val() != fmt.Sprint(i) {
				t.Fatalf("group %d: GET right after SET in a pipeline = %q, want %q", g, get.Val(), fmt.Sprint(i))
			}
		}
		for _, nd := range c.nodes {
			rc := client(t, c.addrs[g][nd.id])
			if nd != lead {
				err := rc.Set(ctx, "x", "y", 0).Err()
				want := fmt.Sprintf("MOVED %d %s", 16287, c.addrs[g][lead.id]) // KEYSLOT x
				if err == nil || err.Error() != want {
					t.Fatalf("group %d: SET at follower %d = %v, want %s", g, nd.id, err, want)
				}
				if err := rc.ReadOnly(ctx).Err(); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 20 {
				if v, err := rc.Get(ctx, fmt.Sprintf("g%d-k%d", g, i)).Result(); err != nil || v != fmt.Sprint(i) {
					t.Fatalf("group %d, node %d: GET = %q, %v; want %d", g, nd.id, v, err, i)
				}
			}
			if v, err := rc.Get(ctx, "counter").Result(); err != nil || v != "1" {
				t.Fatalf("group %d, node %d: counter = %q, %v; want 1 (each group its own store)", g, nd.id, v, err)
			}
		}
	}
}

// TestLeaderChange stops the node that leads a group, writes through the
// new leader, and reads every write back; a write at the new leader's
// stopped predecessor's follower is redirected to it.
func TestLeaderChange(t *testing.T) {
	c := startCluster(t, 1)
	ctx := context.Background()
	old := c.leader(t, 1)
	if err := client(t, c.addrs[1][old.id]).Set(ctx, "before", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	c.stop(old)
	lead := c.leader(t, 1)
	if lead == old {
		t.Fatal("the stopped node still leads")
	}
	rc := client(t, c.addrs[1][lead.id])
	if err := rc.Set(ctx, "after", "2", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"before", "after"} {
		if err := rc.Get(ctx, k).Err(); err != nil {
			t.Fatalf("GET %s at the new leader: %v", k, err)
		}
	}
	for _, nd := range c.nodes {
		if nd != lead && nd.host != nil {
			err := client(t, c.addrs[1][nd.id]).Set(ctx, "x", "y", 0).Err()
			if err == nil || !strings.HasSuffix(err.Error(), c.addrs[1][lead.id]) {
				t.Fatalf("SET at follower %d = %v, want MOVED to %s", nd.id, err, c.addrs[1][lead.id])
			}
		}
	}
}

// TestNoLeader sees SAVE answer an error, INFO say the group is durable,
// and a
// write to a group that lost its majority fail: as an unknown outcome at
// the leader that loses its leadership meanwhile, then, once LeaderWait
// passes with no leader, with CLUSTERDOWN.
func TestNoLeader(t *testing.T) {
	c := startCluster(t, 1)
	ctx := context.Background()
	lead := c.leader(t, 1)
	rc := client(t, c.addrs[1][lead.id])
	// Its writes are durable, its snapshots the Host's.
	if info, err := rc.Info(ctx, "persistence").Result(); err != nil || !strings.Contains(info, "durable:1\r\n") ||
		!strings.Contains(info, "fsync_policy:always\r\n") {
		t.Fatalf("INFO persistence = %q, %v; want durable:1 and fsync_policy:always", info, err)
	}
	if err := rc.Save(ctx).Err(); err == nil || !strings.Contains(err.Error(), "on its own schedule") {
		t.Fatalf("SAVE = %v, want an error saying snapshots are taken on their own schedule", err)
	}
	for _, nd := range c.nodes {
		if nd != lead {
			c.stop(nd)
		}
	}
	// A quiesced leader ticks again once a write wakes it, and steps down
	// once it misses its quorum (CheckQuorum): the write's outcome is then
	// unknown. Once it has no leader, the group refuses writes.
	err := rc.Set(ctx, "k", "v", 0).Err()
	if err == nil || !strings.HasPrefix(err.Error(), "UNKNOWN") && !strings.HasPrefix(err.Error(), "CLUSTERDOWN") {
		t.Fatalf("SET at a leader that lost its quorum = %v, want UNKNOWN or CLUSTERDOWN", err)
	}
	for deadline := time.Now().Add(10 * time.Second); lead.host.Leader(1) != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the leader of a group with no quorum did not step down")
		}
	}
	err = rc.Set(ctx, "k", "v", 0).Err()
	if err == nil || !strings.HasPrefix(err.Error(), "CLUSTERDOWN") {
		t.Fatalf("SET with no leader = %v, want CLUSTERDOWN", err)
	}
}

// TestSnapshotRestore writes keys with a deadline, a session and a watch,
// snapshots the state machine, writes more, and restores the snapshot
// into another: it holds what the first held at the snapshot, and only
// that.
func TestSnapshotRestore(t *testing.T) {
	sm := NewStateMachine(store.Options{})
	apply := func(index uint64, fill func(b *store.Batch)) { applyBatch(sm, index, fill) }
	apply(1, func(b *store.Batch) {
		for i := range 100 {
			b.Add(store.OpSet, 0, []byte(fmt.Sprintf("k%03d", i)), bytes.Repeat([]byte{byte(i)}, i))
		}
		b.Add(store.OpSessionOpen, 0)
		b.Add(store.OpSetExpire, 0, []byte("k000"), []byte{}, store.DeadlineArg(time.Now().Add(time.Hour).UnixMilli()))
	})
	st := sm.Store()
	sessions, deadlines, watches := st.Sessions(), st.Deadlines(), st.Watches()
	if len(sessions) == 0 || len(deadlines) == 0 {
		t.Fatal("the state to snapshot has no sessions or deadlines")
	}
	write, err := sm.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	apply(2, func(b *store.Batch) { b.Add(store.OpSet, 0, []byte("later"), []byte("x")) })
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		t.Fatal(err)
	}
	got := NewStateMachine(store.Options{})
	if err := got.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	if got.Applied() != 1 {
		t.Fatalf("restored applied index %d, want 1", got.Applied())
	}
	if got.Store().Len() != 100 {
		t.Fatalf("restored %d keys, want 100", got.Store().Len())
	}
	if !bytes.Equal(got.Store().Sessions(), sessions) || !bytes.Equal(got.Store().Deadlines(), deadlines) ||
		!bytes.Equal(got.Store().Watches(), watches) {
		t.Fatal("the restored sessions, deadlines or watches differ from the snapshot's")
	}
	for i := range 100 {
		v, ok := got.Store().Get([]byte(fmt.Sprintf("k%03d", i)))
		if !ok || !bytes.Equal(v, bytes.Repeat([]byte{byte(i)}, i)) {
			t.Fatalf("k%03d restored as %q, %v", i, v, ok)
		}
	}
	if _, ok := got.Store().Get([]byte("later")); ok {
		t.Fatal("a key written after the snapshot was restored")
	}
	if err := got.Restore(strings.NewReader("not a snapshot")); err == nil {
		t.Fatal("Restore took garbage")
	}
}

// TestMembership starts node 4 as a joiner of group 1 (given the group's
// first members), adds it with FLINT.MEMBER ADD at the leader, writing
// before and after, removes an original follower, writes more, hands the
// leadership to node 4 and writes there: every acknowledged write reads
// back at node 4. A change asked of a follower, or with a bad address,
// is refused, and the removed member answers CLUSTERDOWN.
func TestMembership(t *testing.T) {
	c := startCluster(t, 1)
	ctx := context.Background()
	lead := c.leader(t, 1)
	rc := client(t, c.addrs[1][lead.id])
	var keys []string
	write := func(rc *redis.Client, prefix string) {
		t.Helper()
		for i := range 30 {
			k := fmt.Sprintf("%s-%d", prefix, i)
			if err := rc.Set(ctx, k, k, 0).Err(); err != nil {
				t.Fatalf("SET %s: %v", k, err)
			}
			keys = append(keys, k)
		}
	}
	write(rc, "before")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.addrs[1][4] = ln.Addr().String()
	joiner := c.startNode(t, 4, []uint64{1, 2, 3}, map[uint64]map[uint64]net.Listener{1: {4: ln}})
	var follower *testNode
	for _, nd := range c.nodes[:3] {
		if nd != lead {
			follower = nd
		}
	}
	add := []any{"FLINT.MEMBER", "ADD", "4", c.addrs[1][4] + "@peer4:7000"}
	if err := client(t, c.addrs[1][follower.id]).Do(ctx, add...).Err(); err == nil || !strings.HasPrefix(err.Error(), "READONLY") {
		t.Fatalf("FLINT.MEMBER ADD at a follower = %v, want READONLY", err)
	}
	if err := rc.Do(ctx, "FLINT.MEMBER", "ADD", "4", "no-peer").Err(); err == nil || !strings.Contains(err.Error(), "want host:port@peerport") {
		t.Fatalf("FLINT.MEMBER ADD without a peer address = %v, want an error naming the form", err)
	}
	if err := rc.Do(ctx, add...).Err(); err != nil {
		t.Fatalf("FLINT.MEMBER ADD: %v", err)
	}
	// Added again, with other addresses, a member keeps its own.
	if err := rc.Do(ctx, "FLINT.MEMBER", "ADD", "4", "127.0.0.1:1@peer4:7001").Err(); err != nil {
		t.Fatalf("FLINT.MEMBER ADD of a voter: %v", err)
	}
	if info, _ := lead.learned.Load(uint64(4)); info != c.addrs[1][4]+"@peer4:7000" {
		t.Fatalf("the leader learned node 4's info %v, want its first addresses", info)
	}
	write(rc, "added")

	if err := rc.Do(ctx, "FLINT.MEMBER", "REMOVE", fmt.Sprint(follower.id)).Err(); err != nil {
		t.Fatalf("FLINT.MEMBER REMOVE %d: %v", follower.id, err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := follower.host.Status(1); errors.Is(err, multiraft.ErrNoGroup) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the removed member did not stop the group")
		}
	}
	if err := client(t, c.addrs[1][follower.id]).Set(ctx, "x", "y", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "CLUSTERDOWN") {
		t.Fatalf("SET at the removed member = %v, want CLUSTERDOWN", err)
	}
	c.stop(follower)
	write(rc, "removed")

	if err := rc.Do(ctx, "FLINT.MEMBER", "TRANSFER", "4").Err(); err != nil {
		t.Fatalf("FLINT.MEMBER TRANSFER 4: %v", err)
	}
	if got := c.leader(t, 1); got != joiner {
		t.Fatalf("node %d leads after the transfer to node 4", got.id)
	}
	rc4 := client(t, c.addrs[1][4])
	write(rc4, "joiner")
	for _, k := range keys {
		if v, err := rc4.Get(ctx, k).Result(); err != nil || v != k {
			t.Fatalf("GET %s at node 4 = %q, %v", k, v, err)
		}
	}
	var ids []uint64
	for _, m := range lead.backends[1].ClusterView().Members {
		ids = append(ids, m.ID)
	}
	if !slices.Contains(ids, 4) || slices.Contains(ids, follower.id) || len(ids) != 3 {
		t.Fatalf("the members the changes were made at are %v, want node 4 in and node %d out", ids, follower.id)
	}
}

// TestCallIDsNeverMeet: the ids that name waiting calls in the entries
// of a group's log are never the same for two nodes, or for one node
// before and after a restart. Every member's StateMachine completes the
// call waiting on it for an entry's id: ids that met would answer a
// client with another batch's results, as ids counted from 1 on every
// start did when a restarted node replayed its own earlier entries (flint
// check --hosted under kill-leader: a server crashed replying to a batch
// that got another's results).
func TestCallIDsNeverMeet(t *testing.T) {
	seen := map[uint64]int{}
	for i, self := range []uint64{1, 2, 1} { // node 1 twice: before and after a restart
		b := New(Config{Self: self}, NewStateMachine(store.Options{}))
		for range 1000 {
			id := b.newID()
			if j, ok := seen[id]; ok {
				t.Fatalf("id %d drawn by backend %d (node %d) and backend %d", id, i, self, j)
			}
			seen[id] = i
		}
	}
}
