package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flintkv/flint/internal/proctest"
)

// group is a replicated group of `flint serve` processes on loopback.
// Member i has id i+1; the first are the initial members, the others
// joined (see join).
type group struct {
	t       *testing.T
	members string   // the --initial-members list
	initial int      // how many members it lists
	addrs   []string // client addresses, by member index
	peers   []string // peer addresses, by member index
	args    []string // more flags for every member's flint serve
	dirs    []string
	cmds    []*exec.Cmd
	logs    []*proctest.Buffer
}

// startGroup starts a group of n members, each on a new data directory.
func startGroup(t *testing.T, n int) *group {
	g := newGroup(t, n)
	for i := range n {
		g.start(i)
	}
	return g
}

// newGroup makes a group of n members, without starting them: the test
// may set their data directories and flags first.
func newGroup(t *testing.T, n int) *group {
	g := &group{t: t, initial: n}
	var list []string
	for i := range n {
		g.add()
		list = append(list, fmt.Sprintf("%d=%s@%s", i+1, g.addrs[i], g.peers[i]))
	}
	g.members = strings.Join(list, ",")
	t.Cleanup(func() {
		for i, c := range g.cmds {
			if c != nil && c.ProcessState == nil {
				c.Process.Kill()
				c.Wait()
			}
			if t.Failed() && g.logs[i] != nil {
				t.Logf("member %d's logs:\n%s", i+1, g.logs[i])
			}
		}
	})
	return g
}

// add gives the group one more member's addresses and data directory,
// and returns its index; it is not started. The addresses differ from
// every other member's: FreeAddr alone may give a port twice while the
// members given it are not listening yet.
func (g *group) add() int {
	var two []string
	for len(two) < 2 {
		a := proctest.FreeAddr(g.t)
		if !slices.Contains(g.addrs, a) && !slices.Contains(g.peers, a) && !slices.Contains(two, a) {
			two = append(two, a)
		}
	}
	return g.addAt(two[0], two[1])
}

// addAt is add with the member's client and peer addresses given.
func (g *group) addAt(addr, peer string) int {
	i := len(g.addrs)
	g.addrs, g.peers = append(g.addrs, addr), append(g.peers, peer)
	g.dirs = append(g.dirs, filepath.Join(g.t.TempDir(), fmt.Sprint("m", i+1)))
	g.cmds, g.logs = append(g.cmds, nil), append(g.logs, nil)
	return i
}

// join starts a new member with --join and returns its index. It is not
// in the group until the leader adds it (FLINT.MEMBER ADD id g.joinAddr(i)).
func (g *group) join() int {
	i := g.add()
	g.start(i)
	return i
}

// joinAt is join with the new member's client and peer addresses given.
func (g *group) joinAt(addr, peer string) int {
	i := g.addAt(addr, peer)
	g.start(i)
	return i
}

// joinAddr is member i's client@peer address, as FLINT.MEMBER ADD takes it.
func (g *group) joinAddr(i int) string { return g.addrs[i] + "@" + g.peers[i] }

// start starts member i on its data directory, and waits until it listens.
func (g *group) start(i int) {
	g.launch(i)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if conn, err := net.Dial("tcp", g.addrs[i]); err == nil {
			conn.Close()
			return
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("member %d does not listen on %s after 20 s", i+1, g.addrs[i])
		}
	}
}

// launch starts member i on its data directory.
func (g *group) launch(i int) {
	g.logs[i] = &proctest.Buffer{}
	args := []string{"serve", "--id", fmt.Sprint(i + 1), "--initial-members", g.members,
		"--cluster-secret", "test-secret", "--dir", g.dirs[i], "--raft-tick", "20ms", "--huge-pages=false"}
	if i >= g.initial {
		args = append(args, "--join", g.joinAddr(i))
	}
	c := exec.Command(flintBin, append(args, g.args...)...)
	c.Stderr = g.logs[i]
	if err := c.Start(); err != nil {
		g.t.Fatal(err)
	}
	g.cmds[i] = c
}

// awaitRemoved waits until member i, removed from the group, exits as a
// removed member does.
func (g *group) awaitRemoved(i int) { g.awaitExit(i, "removed from its group") }

// awaitExit waits up to 20 s for member i's process to exit with an error,
// having logged each of wants.
func (g *group) awaitExit(i int, wants ...string) {
	g.t.Helper()
	exited := make(chan error, 1)
	go func() { exited <- g.cmds[i].Wait() }()
	select {
	case err := <-exited:
		for _, want := range wants {
			if err == nil || !strings.Contains(g.logs[i].String(), want) {
				g.t.Fatalf("member %d exited with %v, and did not log %q; logs:\n%s", i+1, err, want, g.logs[i])
			}
		}
	case <-time.After(20 * time.Second):
		g.t.Fatalf("member %d did not exit within 20 s", i+1)
	}
}

// live returns the client addresses of the members whose process runs.
func (g *group) live() []string {
	var addrs []string
	for i, c := range g.cmds {
		if c != nil && c.ProcessState == nil {
			addrs = append(addrs, g.addrs[i])
		}
	}
	return addrs
}

// readOnlyClient returns a client of the member at addr whose connections
// send READONLY, so that it serves reads itself (through the leader's read
// index), closed when the test ends.
func readOnlyClient(t *testing.T, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: 20, MinRetryBackoff: 20 * time.Millisecond,
		OnConnect: func(ctx context.Context, cn *redis.Conn) error { return cn.ReadOnly(ctx).Err() }})
	t.Cleanup(func() { c.Close() })
	return c
}

// kill kills member i with SIGKILL.
func (g *group) kill(i int) {
	g.cmds[i].Process.Signal(syscall.SIGKILL)
	g.cmds[i].Wait()
}

// leader returns the index of the member that leads, once every live
// member's CLUSTER SLOTS names it as master and it believes it leads.
func (g *group) leader(ctx context.Context) int {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		masters := map[string]bool{}
		for i, addr := range g.addrs {
			if g.cmds[i].ProcessState == nil {
				masters[g.master(ctx, addr)] = true
			}
		}
		if len(masters) != 1 {
			continue
		}
		for i, addr := range g.addrs {
			if masters[addr] && g.cmds[i].ProcessState == nil && g.leads(ctx, addr) {
				return i
			}
		}
	}
	g.t.Fatal("the live members did not agree on a leader within 30 s")
	return -1
}

// master returns the master that the member at addr names, or "".
func (g *group) master(ctx context.Context, addr string) string {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	//lint:ignore SA1019 CLUSTER SLOTS is what go-redis's ClusterClient asks, deprecated or not
	slots, err := c.ClusterSlots(ctx).Result()
	if err != nil || len(slots) != 1 || len(slots[0].Nodes) == 0 {
		return ""
	}
	return slots[0].Nodes[0].Addr
}

// leads reports whether the member at addr believes it leads.
func (g *group) leads(ctx context.Context, addr string) bool {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	//lint:ignore SA1019 CLUSTER SLOTS is what go-redis's ClusterClient asks, deprecated or not
	slots, err := c.ClusterSlots(ctx).Result()
	info, ierr := c.ClusterInfo(ctx).Result()
	return err == nil && ierr == nil && len(slots) == 1 && len(slots[0].Nodes) > 0 &&
		slots[0].Nodes[0].Addr == addr && strings.Contains(info, "cluster_state:ok")
}

// TestReplicatedGroup runs three members as processes and writes to them
// through go-redis's ClusterClient, which finds the leader with CLUSTER
// SLOTS and follows MOVED: the leader is killed with SIGKILL midway, the
// client goes on with the new leader, the old one restarts and catches
// up, and every acknowledged write reads back from every member (READONLY
// reads, through the leader's read index).
func TestReplicatedGroup(t *testing.T) {
	g := startGroup(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cc := clusterClient(g.addrs)
	defer cc.Close()
	set := func(from, to int) {
		for i := from; i < to; i++ {
			if err := cc.Set(ctx, fmt.Sprint("k", i), fmt.Sprint(i), 0).Err(); err != nil {
				t.Fatalf("SET k%d: %v", i, err)
			}
		}
	}
	start := time.Now()
	set(0, 50)
	old := g.leader(ctx)
	t.Logf("%v: 50 writes; member %d leads; killing it", time.Since(start), old+1)
	g.kill(old)
	t.Logf("%v: member %d leads now", time.Since(start), g.leader(ctx)+1)

	set(50, 100)
	t.Logf("%v: 50 more writes; restarting member %d", time.Since(start), old+1)
	g.start(old)
	for i, addr := range g.addrs {
		c := readOnlyClient(t, addr)
		for k := range 100 {
			v, err := c.Get(ctx, fmt.Sprint("k", k)).Result()
			if err != nil || v != fmt.Sprint(k) {
				t.Fatalf("member %d: k%d = %q (%v)", i+1, k, v, err)
			}
		}
		t.Logf("%v: member %d holds every write", time.Since(start), i+1)
	}
	// ROLE and INFO replication name the leader, as Redis shapes them.
	lead0 := g.leader(ctx)
	lc := redis.NewClient(&redis.Options{Addr: g.addrs[lead0]})
	defer lc.Close()
	role, err := lc.Do(ctx, "role").Slice()
	if err != nil || len(role) != 3 || role[0] != "master" || len(role[2].([]any)) != 2 {
		t.Fatalf("ROLE at the leader = %v (%v)", role, err)
	}
	fc := redis.NewClient(&redis.Options{Addr: g.addrs[(lead0+1)%3]})
	defer fc.Close()
	info, err := fc.Info(ctx, "replication").Result()
	host, port, _ := strings.Cut(g.addrs[lead0], ":")
	if err != nil || !strings.Contains(info, "role:slave") || !strings.Contains(info, "master_host:"+host+"\r\nmaster_port:"+port) {
		t.Fatalf("INFO replication at a follower:\n%s (%v)", info, err)
	}
	// HELLO and INFO say cluster mode, as cluster clients check.
	hello, err := fc.Do(ctx, "hello", "3").Result()
	if m, ok := hello.(map[any]any); err != nil || !ok || m["mode"] != "cluster" || m["role"] != "replica" {
		t.Fatalf("HELLO 3 at a follower = %v (%v), want mode cluster and role replica", hello, err)
	}
	if info, err := lc.Info(ctx, "server", "cluster").Result(); err != nil || !strings.Contains(info, "redis_mode:cluster\r\n") || !strings.Contains(info, "cluster_enabled:1\r\n") {
		t.Fatalf("INFO server cluster at the leader:\n%s (%v)", info, err)
	}
	shards, err := lc.ClusterShards(ctx).Result()
	if err != nil || len(shards) != 1 || len(shards[0].Nodes) != 3 || shards[0].Slots[0].End != 16383 {
		t.Fatalf("CLUSTER SHARDS = %+v (%v)", shards, err)
	}
	for _, n := range shards[0].Nodes {
		if (n.Role == "master") != (fmt.Sprintf("%s:%d", n.IP, n.Port) == g.addrs[lead0]) {
			t.Fatalf("CLUSTER SHARDS names %s:%d %s; the leader is %s", n.IP, n.Port, n.Role, g.addrs[lead0])
		}
	}
	// A follower without READONLY redirects to the leader.
	lead := g.leader(ctx)
	follower := (lead + 1) % 3
	c := redis.NewClient(&redis.Options{Addr: g.addrs[follower], MaxRetries: -1})
	defer c.Close()
	if err := c.Get(ctx, "k1").Err(); err == nil || !strings.HasPrefix(err.Error(), "MOVED ") || !strings.HasSuffix(err.Error(), g.addrs[lead]) {
		t.Fatalf("GET at a follower = %v, want MOVED to %s", err, g.addrs[lead])
	}
}

// clusterUp starts `flint cluster up` on dir and returns it with its
// members' client addresses, once it says they are up.
func clusterUp(t *testing.T, dir string, nodes int) (*exec.Cmd, []string) {
	c, addrs, _ := clusterUpArgs(t, "--nodes", fmt.Sprint(nodes), "--dir", dir)
	return c, addrs
}

// clusterUpArgs starts `flint cluster up args...` and returns it with its
// processes' client addresses and names ("member 1", "manager", "group 2
// member 1"), in the order it printed them, once it says they are up.
func clusterUpArgs(t *testing.T, args ...string) (*exec.Cmd, []string, []string) {
	c := exec.Command(flintBin, append([]string{"cluster", "up"}, args...)...)
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopClusterUp(c) })
	var addrs, names []string
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if name, rest, ok := strings.Cut(lines.Text(), ": "); ok && strings.Contains(rest, " (log: ") {
			names, addrs = append(names, name), append(addrs, strings.Fields(rest)[0])
		}
		if strings.Contains(lines.Text(), " up; Ctrl-C stops them") {
			go io.Copy(io.Discard, out)
			return c, addrs, names
		}
	}
	t.Fatalf("flint cluster up ended before its processes were up: %v", lines.Err())
	return nil, nil, nil
}

// stopClusterUp stops `flint cluster up` as Ctrl-C does, so that it stops
// its members too (SIGKILL would leave them running), and kills it if it
// has not exited within 30 s.
func stopClusterUp(c *exec.Cmd) {
	if c.ProcessState != nil {
		return
	}
	c.Process.Signal(os.Interrupt)
	exited := make(chan struct{})
	go func() { c.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		c.Process.Kill()
		<-exited
	}
}

// TestClusterUp starts a cluster of three with `flint cluster up`, writes
// to it, stops it with SIGINT (it exits 0), starts it again on the same
// directory: the same addresses, and the write is there.
func TestClusterUp(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cluster")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	up, addrs := clusterUp(t, dir, 3)
	if len(addrs) != 3 {
		t.Fatalf("flint cluster up printed %v, want 3 addresses", addrs)
	}
	cc := clusterClient(addrs)
	defer cc.Close()
	if err := cc.Set(ctx, "greeting", "hello", 0).Err(); err != nil {
		t.Fatal(err)
	}
	up.Process.Signal(os.Interrupt)
	if err := up.Wait(); err != nil {
		t.Fatalf("flint cluster up after SIGINT: %v", err)
	}
	_, again := clusterUp(t, dir, 3)
	if strings.Join(again, ",") != strings.Join(addrs, ",") {
		t.Fatalf("restarted on %v, first on %v", again, addrs)
	}
	if v, err := cc.Get(ctx, "greeting").Result(); err != nil || v != "hello" {
		t.Fatalf("greeting after a restart = %q (%v)", v, err)
	}
}

// TestMembershipOnline adds a fourth member to a running group of three
// (started with --join, added with FLINT.MEMBER ADD at the leader), reads
// a write there, then removes an original member, which exits, and the
// group of three left goes on taking writes.
func TestMembershipOnline(t *testing.T) {
	g := startGroup(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lead := g.leader(ctx)
	lc := redis.NewClient(&redis.Options{Addr: g.addrs[lead]})
	defer lc.Close()
	if err := lc.Set(ctx, "before", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	m4 := g.join()
	if err := lc.Do(ctx, "flint.member", "add", m4+1, g.joinAddr(m4)).Err(); err != nil {
		t.Fatalf("FLINT.MEMBER ADD: %v", err)
	}
	c4 := readOnlyClient(t, g.addrs[m4])
	if v, err := c4.Get(ctx, "before").Result(); err != nil || v != "1" {
		t.Fatalf("the new member: before = %q (%v)", v, err)
	}
	gone := (lead + 1) % 3
	if err := lc.Do(ctx, "flint.member", "remove", gone+1).Err(); err != nil {
		t.Fatalf("FLINT.MEMBER REMOVE: %v", err)
	}
	g.awaitRemoved(gone)
	if err := lc.Set(ctx, "after", "2", 0).Err(); err != nil {
		t.Fatalf("a write after the removal: %v", err)
	}
	if v, err := c4.Get(ctx, "after").Result(); err != nil || v != "2" {
		t.Fatalf("the new member: after = %q (%v)", v, err)
	}
	if err := lc.Do(ctx, "flint.member", "add", 5, "bad").Err(); err == nil {
		t.Fatal("FLINT.MEMBER ADD with a bad address succeeded")
	}
}
