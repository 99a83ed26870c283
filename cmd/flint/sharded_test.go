package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flintkv/flint/internal/proctest"
	"github.com/flintkv/flint/internal/slot"
)

// sharded is a sharded cluster of `flint harness` processes on loopback
// in the shape of the users' harness without replication: one manager
// and a server per partition.
type sharded struct {
	t       *testing.T
	manager string   // the manager's client address
	servers []string // by partition
	dirs    []string
	cmds    []*exec.Cmd // the manager's last
	logs    []*proctest.Buffer
}

// startSharded starts a manager and n servers, and waits until the
// manager's CLUSTER INFO says every slot is served.
func startSharded(t *testing.T, n int) *sharded {
	s := &sharded{t: t, manager: proctest.FreeAddr(t)}
	for i := range n {
		s.servers = append(s.servers, proctest.FreeAddr(t))
		s.dirs = append(s.dirs, filepath.Join(t.TempDir(), fmt.Sprint("p", i)))
	}
	s.cmds, s.logs = make([]*exec.Cmd, n+1), make([]*proctest.Buffer, n+1)
	t.Cleanup(func() {
		for i, c := range s.cmds {
			if c != nil && c.ProcessState == nil {
				c.Process.Kill()
				c.Wait()
			}
			if t.Failed() && s.logs[i] != nil {
				t.Logf("process %d's logs:\n%s", i, s.logs[i])
			}
		}
	})
	s.launch(n, s.manager, "manager", port(t, s.manager), strings.Join(s.servers, ","))
	for i := range n {
		s.startServer(i)
	}
	s.awaitState("ok")
	return s
}

// startServer starts partition i's server on its data directory.
func (s *sharded) startServer(i int) {
	s.launch(i, s.servers[i], "server", fmt.Sprint(i), s.manager, port(s.t, s.servers[i]), s.dirs[i])
}

// launch starts process i, `flint harness args...`, and waits until it
// listens on addr.
func (s *sharded) launch(i int, addr string, args ...string) {
	s.logs[i] = &proctest.Buffer{}
	c := exec.Command(flintBin, append([]string{"harness"}, args...)...)
	c.Stderr = s.logs[i]
	if err := c.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.cmds[i] = c
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if conn, err := net.Dial("tcp", addr); err == nil {
			conn.Close()
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("process %d (%v) does not listen on %s after 20 s", i, args, addr)
		}
	}
}

// kill kills partition i's server with SIGKILL.
func (s *sharded) kill(i int) {
	s.cmds[i].Process.Signal(syscall.SIGKILL)
	s.cmds[i].Wait()
}

// awaitState waits up to 20 s until the manager's CLUSTER INFO says
// cluster_state:want.
func (s *sharded) awaitState(want string) {
	s.t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.manager})
	defer c.Close()
	var info string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		info, _ = c.ClusterInfo(context.Background()).Result()
		if strings.Contains(info, "cluster_state:"+want+"\r\n") {
			return
		}
	}
	s.t.Fatalf("the manager's CLUSTER INFO is not %s after 20 s:\n%s", want, info)
}

// owner returns the partition whose slots hold key, as the harness
// manager splits them (as redis-cli --cluster create does).
func (s *sharded) owner(key string) int {
	n, sl := len(s.servers), slot.Of([]byte(key))
	for i := range n {
		if last := int(float64(i+1)*float64(slot.Count)/float64(n) - 1 + 0.5); sl <= last || i == n-1 {
			return i
		}
	}
	return n - 1
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
