package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flintkv/flint/internal/procnet"
	"github.com/flintkv/flint/internal/proctest"
	"github.com/flintkv/flint/internal/slot"
)

// harnessProcs are a test's `flint harness` (or `flint serve`) processes,
// by index, each listening for clients on its address. Each can be killed
// with SIGKILL and started again with the same arguments. Those still
// running when the test ends are killed; if it failed, every process's
// logs are printed.
type harnessProcs struct {
	t     *testing.T
	sub   string     // the flint command each runs: harness or serve
	addrs []string   // where each listens for clients
	args  [][]string // its `flint <sub>` arguments
	// Of each one's last start: its command, its standard error, and a
	// channel closed once it has exited and been reaped.
	cmds   []*exec.Cmd
	logs   []*proctest.Buffer
	exited []chan struct{}
}

func newHarnessProcs(t *testing.T) *harnessProcs { return newProcs(t, "harness") }

// newProcs returns processes that run `flint sub`.
func newProcs(t *testing.T, sub string) *harnessProcs {
	h := &harnessProcs{t: t, sub: sub}
	t.Cleanup(func() {
		for i, c := range h.cmds {
			if c == nil {
				continue
			}
			c.Process.Kill()
			<-h.exited[i]
			if t.Failed() {
				t.Logf("process %d, flint %s %s, logs:\n%s", i, h.sub, strings.Join(h.args[i], " "), h.logs[i])
			}
		}
	})
	return h
}

// add registers a process, `flint <sub> args...` listening on addr, and
// returns its index. It does not start it.
func (h *harnessProcs) add(addr string, args ...string) int {
	h.addrs, h.args = append(h.addrs, addr), append(h.args, args)
	h.cmds, h.logs, h.exited = append(h.cmds, nil), append(h.logs, nil), append(h.exited, nil)
	return len(h.addrs) - 1
}

// start starts processes ids, all at once, and waits until each listens.
func (h *harnessProcs) start(ids ...int) {
	h.t.Helper()
	if err := h.tryStart(ids...); err != nil {
		h.t.Fatal(err)
	}
}

// tryStart is start for goroutines other than the test's, which may not
// call t.Fatal.
func (h *harnessProcs) tryStart(ids ...int) error {
	for _, i := range ids {
		h.logs[i] = &proctest.Buffer{}
		c := exec.Command(flintBin, append([]string{h.sub}, h.args[i]...)...)
		c.Stderr = h.logs[i]
		if err := c.Start(); err != nil {
			return err
		}
		exited := make(chan struct{})
		go func() { c.Wait(); close(exited) }()
		h.cmds[i], h.exited[i] = c, exited
	}
	for _, i := range ids {
		if err := h.await(i); err != nil {
			return err
		}
	}
	return nil
}

// await waits up to 30 s until process i listens on its address.
func (h *harnessProcs) await(i int) error {
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if h.down(i) {
			return fmt.Errorf("process %d (flint %s %s) exited at startup:\n%s", i, h.sub, strings.Join(h.args[i], " "), h.logs[i])
		}
		var conn net.Conn
		if conn, err = net.Dial("tcp", h.addrs[i]); err != nil {
			continue
		}
		conn.Close()
		var listens bool
		if listens, err = procnet.Listens(h.cmds[i].Process.Pid, h.addrs[i]); listens {
			return nil
		}
	}
	return fmt.Errorf("process %d (flint %s %s) does not listen on %s after 30 s (%v)", i, h.sub, strings.Join(h.args[i], " "), h.addrs[i], err)
}

// kill kills process i with SIGKILL and waits until it is gone.
func (h *harnessProcs) kill(i int) {
	h.cmds[i].Process.Signal(syscall.SIGKILL)
	<-h.exited[i]
}

// down reports whether process i has exited (or never started).
func (h *harnessProcs) down(i int) bool {
	if h.exited[i] == nil {
		return true
	}
	select {
	case <-h.exited[i]:
		return true
	default:
		return false
	}
}

// sharded is a sharded cluster of `flint harness` processes on loopback
// in the shape of the users' harness without replication: one manager
// and a server per partition. Partition i's server is process i.
type sharded struct {
	*harnessProcs
	manager string   // the manager's client address
	servers []string // by partition
}

// startSharded starts a manager and n servers, and waits until the
// manager's CLUSTER INFO says every slot is served.
func startSharded(t *testing.T, n int) *sharded {
	addrs := freeAddrs(t, n+1)
	s := &sharded{harnessProcs: newHarnessProcs(t), manager: addrs[n], servers: addrs[:n]}
	var ids []int
	for i, addr := range s.servers {
		dir := filepath.Join(t.TempDir(), fmt.Sprint("p", i))
		ids = append(ids, s.add(addr, "server", fmt.Sprint(i), s.manager, port(t, addr), dir))
	}
	s.start(s.add(s.manager, "manager", port(t, s.manager), strings.Join(s.servers, ",")))
	s.start(ids...)
	awaitClusterState(t, s.manager, "ok")
	return s
}

// startServer starts partition i's server on its data directory.
func (s *sharded) startServer(i int) { s.start(i) }

// awaitState waits until the manager's CLUSTER INFO says
// cluster_state:want.
func (s *sharded) awaitState(want string) {
	s.t.Helper()
	awaitClusterState(s.t, s.manager, want)
}

// owner returns the partition whose slots hold key.
func (s *sharded) owner(key string) int { return partitionOf(key, len(s.servers)) }

// awaitClusterState waits up to 30 s until the CLUSTER INFO of the
// manager at addr says cluster_state:want.
func awaitClusterState(t *testing.T, addr, want string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	var info string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		info, _ = c.ClusterInfo(context.Background()).Result()
		if strings.Contains(info, "cluster_state:"+want+"\r\n") {
			return
		}
	}
	t.Fatalf("the manager's CLUSTER INFO at %s is not %s after 30 s:\n%s", addr, want, info)
}

// partitionOf returns the partition, of n, whose slots hold key, as the
// harness's managers split them (as redis-cli --cluster create does).
func partitionOf(key string, n int) int {
	sl := slot.Of([]byte(key))
	for i := range n {
		if last := int(float64(i+1)*float64(slot.Count)/float64(n) - 1 + 0.5); sl <= last {
			return i
		}
	}
	return n - 1
}

// freeAddrs returns n distinct loopback addresses that nothing listened
// on a moment ago. FreeAddr alone may give the same port twice.
func freeAddrs(t *testing.T, n int) []string {
	var addrs []string
	for len(addrs) < n {
		if a := proctest.FreeAddr(t); !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

func port(t *testing.T, addr string) string {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestShardedCluster runs the harness's shape without replication, three
// partitions: go-redis's ClusterClient, given only the manager's address,
// writes keys that land on their slots' servers (each holds exactly its
// own); a multi-key command across slots is refused with CROSSSLOT; every
// node answers the same CLUSTER SLOTS; with one server killed, the other
// partitions' keys are served and the manager reports the cluster down;
// restarted, the server has its keys back.
func TestShardedCluster(t *testing.T) {
	s := startSharded(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cc := clusterClient([]string{s.manager})
	defer cc.Close()
	const n = 300
	want := make([]int, len(s.servers))
	for i := range n {
		key := fmt.Sprintf("key%05d", i)
		if err := cc.Set(ctx, key, fmt.Sprint(i), 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
		want[s.owner(key)]++
	}
	for i, addr := range s.servers {
		c := redis.NewClient(&redis.Options{Addr: addr})
		size, err := c.DBSize(ctx).Result()
		if err != nil || size != int64(want[i]) {
			t.Fatalf("partition %d holds %d keys (%v), want %d", i, size, err, want[i])
		}
		err = c.Get(ctx, "key00000").Err()
		if i != s.owner("key00000") && (err == nil || !strings.HasPrefix(err.Error(), "MOVED ")) {
			t.Fatalf("GET key00000 at partition %d, which does not own it: %v, want MOVED", i, err)
		}
		c.Close()
	}
	if err := cc.MSet(ctx, "key00001", "a", "key00002", "b").Err(); err == nil || !strings.HasPrefix(err.Error(), "CROSSSLOT") {
		t.Fatalf("MSET across slots = %v, want CROSSSLOT", err)
	}
	if err := cc.MSet(ctx, "{t}1", "a", "{t}2", "b").Err(); err != nil {
		t.Fatalf("MSET within a slot: %v", err)
	}
	var slots []string
	for _, addr := range append([]string{s.manager}, s.servers...) {
		c := redis.NewClient(&redis.Options{Addr: addr})
		//lint:ignore SA1019 CLUSTER SLOTS is what go-redis's ClusterClient asks, deprecated or not
		got, err := c.ClusterSlots(ctx).Result()
		c.Close()
		if err != nil || len(got) != 3 {
			t.Fatalf("CLUSTER SLOTS at %s = %v (%v)", addr, got, err)
		}
		slots = append(slots, fmt.Sprint(got))
	}
	for _, sl := range slots[1:] {
		if sl != slots[0] {
			t.Fatalf("the nodes' CLUSTER SLOTS differ:\n%s", strings.Join(slots, "\n"))
		}
	}

	down := s.owner("key00000")
	s.kill(down)
	s.awaitState("fail")
	// The manager, and then every node, flags it as failed.
	for _, addr := range []string{s.manager, s.servers[(down+1)%3]} {
		awaitNodesLine(t, addr, s.servers[down], "master,fail - 0 0 1 disconnected")
	}
	for i := range n {
		key := fmt.Sprintf("key%05d", i)
		if s.owner(key) == down {
			continue
		}
		if v, err := cc.Get(ctx, key).Result(); err != nil || v != fmt.Sprint(i) {
			t.Fatalf("GET %s with partition %d down = %q (%v)", key, down, v, err)
		}
	}
	s.startServer(down)
	s.awaitState("ok")
	awaitNodesLine(t, s.manager, s.servers[down], "master - 0 0 1 connected")
	for i := range n {
		key := fmt.Sprintf("key%05d", i)
		v, err := cc.Get(ctx, key).Result()
		if err != nil || v != fmt.Sprint(i) {
			t.Fatalf("GET %s after partition %d's restart = %q (%v)", key, down, v, err)
		}
	}
	if err := cc.Get(ctx, "nokey").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET of a key never set = %v, want nil", err)
	}
}

// TestHarnessBadArguments: a role given the wrong arguments exits 2 with
// what it takes, before it starts anything.
func TestHarnessBadArguments(t *testing.T) {
	for _, args := range [][]string{
		{"harness"},
		{"harness", "nobody"},
		{"harness", "manager", "7000"},
		{"harness", "manager", "port", "127.0.0.1:1"},
		{"harness", "server", "-1", "127.0.0.1:1", "7000", t.TempDir()},
		{"harness", "server", "0", "127.0.0.1:1", "70000", t.TempDir()},
		{"harness", "manager-replica", "0", "7000", "7001", "none", "1"},
		{"harness", "server-replica", "0", "x", "127.0.0.1:1", "7000", "7001", "none", t.TempDir()},
		{"harness", "client"},
	} {
		out, code := runFlint(t, flintBin, nil, args...)
		if code != 2 || !strings.Contains(out, "usage: flint harness") {
			t.Errorf("flint %s: exit %d, output:\n%s", strings.Join(args, " "), code, out)
		}
	}
}

// TestClusterUpSharded starts a sharded cluster of two data groups of one
// member each with `flint cluster up --groups 2 --nodes 1`, writes keys
// of both through the manager, stops it with SIGINT, and starts it again
// on the same directory: the same addresses, and the keys are there.
func TestClusterUpSharded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cluster")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	up, addrs, names := clusterUpArgs(t, "--groups", "2", "--nodes", "1", "--dir", dir)
	if strings.Join(names, ",") != "manager,group 1 member 1,group 2 member 1" {
		t.Fatalf("flint cluster up printed %v at %v", names, addrs)
	}
	cc := clusterClient(addrs[:1])
	defer cc.Close()
	// "a" is in slot 15495 (group 2), "b" in 3300 (group 1).
	for _, k := range []string{"a", "b"} {
		if err := cc.Set(ctx, k, "v"+k, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for i, addr := range addrs[1:] {
		c := redis.NewClient(&redis.Options{Addr: addr})
		if n, err := c.DBSize(ctx).Result(); err != nil || n != 1 {
			t.Errorf("group %d holds %d keys (%v), want 1", i+1, n, err)
		}
		c.Close()
	}
	up.Process.Signal(os.Interrupt)
	if err := up.Wait(); err != nil {
		t.Fatalf("flint cluster up after SIGINT: %v", err)
	}
	_, again, _ := clusterUpArgs(t, "--dir", dir, "--nodes", "0")
	if strings.Join(again, ",") != strings.Join(addrs, ",") {
		t.Fatalf("restarted on %v, first on %v", again, addrs)
	}
	for _, k := range []string{"a", "b"} {
		if v, err := cc.Get(ctx, k).Result(); err != nil || v != "v"+k {
			t.Fatalf("%s after a restart = %q (%v)", k, v, err)
		}
	}
}

// awaitNodesLine waits up to 20 s until the CLUSTER NODES of the node at
// addr shows the member at member with flags, master, ping, pong, epoch
// and link as want says.
func awaitNodesLine(t *testing.T, addr, member, want string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	var nodes string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		nodes, _ = c.ClusterNodes(context.Background()).Result()
		for _, line := range strings.Split(nodes, "\n") {
			if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], member+"@") && strings.Contains(line, " "+want) {
				return
			}
		}
	}
	t.Fatalf("CLUSTER NODES at %s does not show %s as %q after 20 s:\n%s", addr, member, want, nodes)
}

// TestClusterTransferSharded: flint cluster transfer, given the addresses
// of one data group of a sharded cluster, moves that group's leadership,
// and not that of the group that serves slot 0.
func TestClusterTransferSharded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cluster")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	_, addrs, names := clusterUpArgs(t, "--groups", "2", "--nodes", "3", "--dir", dir)
	if len(addrs) != 7 || names[4] != "group 2 member 1" {
		t.Fatalf("flint cluster up printed %v at %v", names, addrs)
	}
	g1, g2 := addrs[1:4], addrs[4:7]
	leaderOf := func(members []string) string {
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			for _, a := range members {
				c := redis.NewClient(&redis.Options{Addr: a})
				role, err := c.Do(ctx, "ROLE").Slice()
				c.Close()
				if err == nil && len(role) > 0 && role[0] == "master" {
					return a
				}
			}
		}
		t.Fatalf("no leader among %v in 30 s", members)
		return ""
	}
	lead1, lead2 := leaderOf(g1), leaderOf(g2)
	to := slices.IndexFunc(g2, func(a string) bool { return a != lead2 }) + 1
	if out, code := runFlint(t, flintBin, nil, "cluster", "transfer", fmt.Sprint(to), "--addr", strings.Join(g2, ",")); code != 0 {
		t.Fatalf("flint cluster transfer %d: exit %d\n%s", to, code, out)
	}
	if now := leaderOf(g2); now != g2[to-1] {
		t.Fatalf("group 2 is led by %s after the transfer to member %d (%s)", now, to, g2[to-1])
	}
	if now := leaderOf(g1); now != lead1 {
		t.Fatalf("group 1's leader moved from %s to %s", lead1, now)
	}
	out, code := runFlint(t, flintBin, nil, "cluster", "status", "--addr", strings.Join(g2, ","))
	if code != 0 || !strings.Contains(out, "3 members, 3 voters") || strings.Contains(out, g1[0]) {
		t.Fatalf("flint cluster status of group 2: exit %d\n%s", code, out)
	}
	// Given the manager, status shows every group, with its leader.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out, code = runFlint(t, flintBin, nil, "cluster", "status", "--addr", addrs[0])
		if code == 0 && strings.Contains(out, "2 groups, 16384 of 16384 slots assigned, 2 groups with a leader") &&
			regexp.MustCompile(`(?m)\s`+regexp.QuoteMeta(g2[to-1])+`\s+leader$`).MatchString(out) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("flint cluster status at the manager: exit %d\n%s", code, out)
		}
	}
	t.Logf("flint cluster status at the manager:\n%s", out)
}

// TestHarnessClientWaitsForServers: the harness's client answers nothing
// until the manager and every server are up, though the key of its first
// command is on a server that is up.
func TestHarnessClientWaitsForServers(t *testing.T) {
	addrs := freeAddrs(t, 3)
	h := newHarnessProcs(t)
	manager, servers := addrs[2], addrs[:2]
	m := h.add(manager, "manager", port(t, manager), strings.Join(servers, ","))
	var ids []int
	for i, addr := range servers {
		ids = append(ids, h.add(addr, "server", fmt.Sprint(i), manager, port(t, addr), filepath.Join(t.TempDir(), "p")))
	}
	h.start(m, ids[0])
	c := startLineClient(t, 0, manager)
	// "b" is in slot 3300, partition 0's.
	if _, err := io.WriteString(c.stdin, "PUT b 1\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-c.lines:
		t.Fatalf("the client answered %q with partition 1's server down", l)
	case <-time.After(time.Second):
	}
	h.start(ids[1])
	if l, err := c.next(); err != nil || l != "PUT b not_found" {
		t.Fatalf("the client's first answer, every server up: %q (%v)", l, err)
	}
}
