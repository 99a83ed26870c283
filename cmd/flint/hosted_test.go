package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestHostedCluster runs `flint cluster up --hosted --nodes 3 --groups 6`:
// three processes, each hosting a member of each of six data groups. A
// go-redis ClusterClient writes through it while slots move between two
// groups (hosted by the same nodes) and one node is killed with kill -9
// and started again; then every acknowledged write reads back, through
// the cluster and, linearizably (READONLY), at the restarted node's
// member of the group that owns it. Every group took writes.
func TestHostedCluster(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cluster")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// Groups snapshot every 20 entries: node 2 restarts from its
	// snapshots, and may catch up by one sent while it was down.
	_, addrs, names := clusterUpArgs(t, "--hosted", "--nodes", "3", "--groups", "6", "--dir", dir, "--snapshot-entries", "20")
	if strings.Join(names, ",") != "manager,node 1,node 2,node 3" {
		t.Fatalf("flint cluster up printed %v at %v", names, addrs)
	}
	cc := clusterClient(addrs[:1])
	defer cc.Close()
	w := startWriter(ctx, t, cc)
	w.await(100, "")
	clusterChange(t, nil, "slots 0-1000 belong to group 2", "move-slots", "--addr", addrs[0], "--slots", "0-1000", "--to", "2", "--timeout", "1m")
	w.await(100, "")

	node2 := filepath.Join(dir, "n2")
	args := killNode(t, node2)
	w.await(100, "") // the other two nodes are a majority of every group
	restartNode(t, args, readLayout(t, dir).Secret)
	w.await(100, "")
	served, _ := w.stop()

	members := node2Members(t, dir)
	held := make([]int, len(members)) // by group: the acknowledged writes its node-2 member holds
	acked := 0
	for i, by := range served {
		if by == "" {
			continue
		}
		acked++
		key, want := fmt.Sprint("k", i), fmt.Sprint(i)
		if v, err := cc.Get(ctx, key).Result(); err != nil || v != want {
			t.Fatalf("%s = %q (%v) after the run, want %s", key, v, err, want)
		}
		g := readAtOwner(ctx, t, members, key, want)
		held[g]++
	}
	for g, n := range held {
		if n == 0 {
			t.Errorf("group %d took none of the %d acknowledged writes", g+1, acked)
		}
	}
	snaps, err := filepath.Glob(filepath.Join(node2, "snap", "*", "*.snap"))
	if err != nil || len(snaps) == 0 {
		t.Errorf("node 2 has no snapshot files (%v)", err)
	}
	t.Logf("%d acknowledged writes, by group %v; node 2 holds %d snapshot files", acked, held, len(snaps))
}

// node2Members returns a client of node 2's member of each group, in
// READONLY mode, in the order of the groups in dir's cluster.json.
func node2Members(t *testing.T, dir string) []*redis.Client {
	var cs []*redis.Client
	for _, g := range readLayout(t, dir).Hosted {
		for _, m := range strings.Split(g, ",") {
			if id, addr, _ := strings.Cut(m, "="); id == "2" {
				c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1,
					OnConnect: func(ctx context.Context, cn *redis.Conn) error { return cn.ReadOnly(ctx).Err() }})
				t.Cleanup(func() { c.Close() })
				cs = append(cs, c)
			}
		}
	}
	return cs
}

// readAtOwner reads key at each of members, which answer MOVED but for
// the one whose group owns its slot, retried for up to 20 s while the
// member catches up; it fails unless that member holds want, and returns
// its index.
func readAtOwner(ctx context.Context, t *testing.T, members []*redis.Client, key, want string) int {
	t.Helper()
	var errs []string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		errs = errs[:0]
		for g, c := range members {
			v, err := c.Get(ctx, key).Result()
			switch {
			case err == nil && v == want:
				return g
			case err != nil && strings.HasPrefix(err.Error(), "MOVED"):
			default:
				errs = append(errs, fmt.Sprintf("group %d: %q, %v", g+1, v, err))
			}
		}
	}
	t.Fatalf("%s: no member of node 2 holds %s: %v", key, want, errs)
	return -1
}

// killNode kills with SIGKILL the process serving the data directory
// dir, and returns its command line.
func killNode(t *testing.T, dir string) []string {
	t.Helper()
	pid, args := findNode(t, dir)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	return args
}

// findNode returns the pid and command line of the process serving the
// data directory dir, found by its command line.
func findNode(t *testing.T, dir string) (int, []string) {
	t.Helper()
	pids, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range pids {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte("\x00--dir\x00"+dir+"\x00")) {
			continue
		}
		var pid int
		fmt.Sscanf(p, "/proc/%d/cmdline", &pid)
		return pid, strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
	}
	t.Fatalf("no process serves %s", dir)
	return 0, nil
}

// restartNode starts the command line args again, with the cluster
// secret, and stops it when the test ends.
func restartNode(t *testing.T, args []string, secret string) {
	t.Helper()
	c := exec.Command(args[0], args[1:]...)
	c.Env = append(os.Environ(), "FLINT_CLUSTER_SECRET="+secret)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopClusterUp(c) }) // as Ctrl-C stops a node
}

// hostedLayout is what the tests read of a hosted cluster's cluster.json.
type hostedLayout struct {
	Nodes  string   // each node's peer address, id=host:port
	Hosted []string // each group's members, id=client address
	Secret string
}

func readLayout(t *testing.T, dir string) hostedLayout {
	var l hostedLayout
	b, err := os.ReadFile(filepath.Join(dir, "cluster.json"))
	if err == nil {
		err = json.Unmarshal(b, &l)
	}
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestHostedAddNode runs `flint cluster up --hosted --nodes 3 --groups 1`,
// starts a fourth node with --join-groups 1, adds it with `flint cluster
// add-node` and removes node 1 with `remove-node`, while a go-redis
// ClusterClient writes: every acknowledged write reads back, linearizably
// (READONLY), at node 4.
func TestHostedAddNode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cluster")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	_, addrs, _ := clusterUpArgs(t, "--hosted", "--nodes", "3", "--groups", "1", "--dir", dir)
	l := readLayout(t, dir)
	_, args := findNode(t, filepath.Join(dir, "n1"))
	a := freeAddrs(t, 2)
	client4, peer4 := a[0], a[1]
	set := map[string]string{"--id": "4", "--dir": filepath.Join(dir, "n4"), "--host-nodes": l.Nodes + ",4=" + peer4,
		"--host-groups": "1:" + l.Hosted[0] + ",4=" + client4}
	for i := 1; i+1 < len(args); i++ {
		if v, ok := set[args[i]]; ok {
			args[i+1] = v
		}
	}
	restartNode(t, append(args, "--join-groups", "1"), l.Secret)

	cc := clusterClient(addrs[:1])
	defer cc.Close()
	w := startWriter(ctx, t, cc)
	w.await(50, "")
	clusterChange(t, nil, "was added to group 1, and votes", "add-node", "--addr", addrs[0], "--group", "1", "--id", "4",
		"--node", client4+"@"+peer4, "--timeout", "1m")
	w.await(50, "")
	clusterChange(t, nil, "member 1 was removed from group 1", "remove-node", "--addr", addrs[0], "--group", "1", "--node", "1",
		"--timeout", "1m")
	w.await(50, "")
	served, _ := w.stop()

	rc := redis.NewClient(&redis.Options{Addr: client4, MaxRetries: -1,
		OnConnect: func(ctx context.Context, cn *redis.Conn) error { return cn.ReadOnly(ctx).Err() }})
	defer rc.Close()
	acked := 0
	for i, by := range served {
		if by == "" {
			continue
		}
		acked++
		readAtOwner(ctx, t, []*redis.Client{rc}, fmt.Sprint("k", i), fmt.Sprint(i))
	}
	t.Logf("%d acknowledged writes, all at node 4", acked)
}

// TestServeRejectsBadHostFlags: a node hosting groups refuses, with exit
// status 2 and the flag it faults, a list it cannot use.
func TestServeRejectsBadHostFlags(t *testing.T) {
	nodes := "1=127.0.0.1:17001,2=127.0.0.1:17002"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--id", "1", "--host-nodes", nodes}, "--host-nodes and --host-groups go together"},
		{[]string{"--id", "1", "--host-nodes", nodes, "--host-groups", "1:1=127.0.0.1:7001"}, "needs --managers"},
		{[]string{"--id", "1", "--host-nodes", "1=nohost", "--host-groups", "1:1=127.0.0.1:7001", "--managers", "m:1"}, "--host-nodes: bad peer address"},
		{[]string{"--id", "1", "--host-nodes", nodes, "--host-groups", "1:3=127.0.0.1:7001", "--managers", "m:1"}, "--host-groups: bad member"},
		{[]string{"--id", "1", "--host-nodes", nodes, "--host-groups", "1:1=127.0.0.1:7001;1:2=127.0.0.1:7002", "--managers", "m:1"}, "--host-groups: bad group"},
		{[]string{"--id", "1", "--host-nodes", nodes, "--host-groups", "1:1=127.0.0.1:7001", "--managers", "m:1", "--shard-group", "1"}, "not --initial-members"},
		{[]string{"--id", "1", "--host-nodes", nodes, "--host-groups", "1:1=127.0.0.1:7001,2=127.0.0.1:7002", "--managers", "m:1", "--join-groups", "2"}, "--join-groups: \"2\" is not a group"},
		{[]string{"--id", "1", "--host-nodes", nodes, "--host-groups", "1:2=127.0.0.1:7002", "--managers", "m:1", "--join-groups", "1"}, "--join-groups: group 1: this node"},
	} {
		cmd := exec.Command(flintBin, append([]string{"serve"}, c.args...)...)
		cmd.Env = append(os.Environ(), "FLINT_CLUSTER_SECRET=s")
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), c.want) {
			t.Errorf("serve %v: %v, want exit status 2 and %q:\n%s", c.args, err, c.want, out)
		}
	}
}
