package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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
// dir, waits (up to 10 s) until it is gone, so that its directory's lock
// is free, and returns its command line.
func killNode(t *testing.T, dir string) []string {
	t.Helper()
	pid, args := findNode(t, dir)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, _, ok := nodeProcess(dir); !ok {
			return args
		}
	}
	t.Fatalf("process %d still serves %s 10 s after SIGKILL", pid, dir)
	return nil
}

// findNode returns the pid and command line of the process serving the
// data directory dir, found by its command line.
func findNode(t *testing.T, dir string) (int, []string) {
	t.Helper()
	pid, args, ok := nodeProcess(dir)
	if !ok {
		t.Fatalf("no process serves %s", dir)
	}
	return pid, args
}

// nodeProcess returns the pid and command line of the process serving
// the data directory dir, if one runs (a process that exited has no
// command line).
func nodeProcess(dir string) (int, []string, bool) {
	pids, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range pids {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte("\x00--dir\x00"+dir+"\x00")) {
			continue
		}
		var pid int
		fmt.Sscanf(p, "/proc/%d/cmdline", &pid)
		return pid, strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00"), true
	}
	return 0, nil, false
}

// restartNode starts the command line args again, with the cluster
// secret, and stops it when the test ends.
func restartNode(t *testing.T, args []string, secret string) {
	t.Helper()
	c := exec.Command(args[0], args[1:]...)
	c.Env = append(os.Environ(), "FLINT_CLUSTER_SECRET="+secret)
	logs := &proctest.Buffer{}
	c.Stdout, c.Stderr = logs, logs
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stopClusterUp(c) // as Ctrl-C stops a node
		if t.Failed() {
			t.Logf("the logs of %q, restarted:\n%s", args, logs)
		}
	})
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
// then, while a go-redis ClusterClient writes, starts a fourth node with
// --join-groups 1 and adds it with `flint cluster add-node`, then a fifth
// (named to the cluster by --cluster-id, its --host-nodes naming node 4
// too), removes node 1 with `remove-node`, and hands the leadership to
// node 5. Node 4, killed with kill -9 and restarted, catches up: every
// acknowledged write reads back, linearizably (READONLY), at nodes 4 and
// 5; every other member answers a write MOVED to node 5, and each
// member's CLUSTER SLOTS and CLUSTER NODES name node 5 as the master.
func TestHostedAddNode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cluster")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	_, addrs, _ := clusterUpArgs(t, "--hosted", "--nodes", "3", "--groups", "1", "--dir", dir)
	l := readLayout(t, dir)
	_, args := findNode(t, filepath.Join(dir, "n1"))
	a := freeAddrs(t, 4)
	client4, peer4, client5, peer5 := a[0], a[1], a[2], a[3]
	start := func(id, nodes, client string, extra ...string) []string {
		set := map[string]string{"--id": id, "--dir": filepath.Join(dir, "n"+id), "--host-nodes": nodes,
			"--host-groups": "1:" + l.Hosted[0] + "," + id + "=" + client}
		args := slices.Clone(args)
		for i := 1; i+1 < len(args); i++ {
			if v, ok := set[args[i]]; ok {
				args[i+1] = v
			}
		}
		args = append(args, append([]string{"--join-groups", "1"}, extra...)...)
		restartNode(t, args, l.Secret)
		return args
	}
	args4 := start("4", l.Nodes+",4="+peer4, client4)

	cc := clusterClient(addrs[:1])
	defer cc.Close()
	w := startWriter(ctx, t, cc)
	w.await(50, "")
	clusterChange(t, nil, "was added to group 1, and votes", "add-node", "--addr", addrs[0], "--group", "1", "--id", "4",
		"--node", client4+"@"+peer4, "--timeout", "1m")
	w.await(50, "")
	// Without --cluster-id, node 5's list, with node 4 in it, would name
	// another cluster.
	start("5", l.Nodes+",4="+peer4+",5="+peer5, client5, "--cluster-id", clusterIDOf(t, filepath.Join(dir, "n1")))
	clusterChange(t, nil, "was added to group 1, and votes", "add-node", "--addr", addrs[0], "--group", "1", "--id", "5",
		"--node", client5+"@"+peer5, "--timeout", "1m")
	w.await(50, "")
	clusterChange(t, nil, "member 1 was removed from group 1", "remove-node", "--addr", addrs[0], "--group", "1", "--node", "1",
		"--timeout", "1m")
	w.await(50, "")
	client1 := addrOf(t, l.Hosted[0], "1")
	if out, code := runFlint(t, flintBin, nil, "cluster", "add-node", "--addr", addrs[0], "--group", "1", "--id", "1",
		"--node", client1+"@"+addrOf(t, l.Nodes, "1"), "--timeout", "10s"); code == 0 || !strings.Contains(out, "removed from the group") {
		t.Fatalf("add-node of removed node 1: exit %d, want a refusal naming the removal:\n%s", code, out)
	}
	members := []string{addrOf(t, l.Hosted[0], "2"), addrOf(t, l.Hosted[0], "3"), client4, client5}
	transferTo(ctx, t, members, "5")
	w.await(50, "")
	served, _ := w.stop()

	killNode(t, filepath.Join(dir, "n4"))
	restartNode(t, args4, l.Secret)
	acked := 0
	for _, addr := range []string{client4, client5} {
		rc := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1,
			OnConnect: func(ctx context.Context, cn *redis.Conn) error { return cn.ReadOnly(ctx).Err() }})
		defer rc.Close()
		acked = 0
		for i, by := range served {
			if by != "" {
				acked++
				readAtOwner(ctx, t, []*redis.Client{rc}, fmt.Sprint("k", i), fmt.Sprint(i))
			}
		}
	}
	for _, addr := range members {
		awaitMaster(t, addr, client5)
	}
	t.Logf("%d acknowledged writes, all at nodes 4 and 5", acked)
}

// clusterIDOf returns the cluster id that the data directory dir's
// IDENTITY records, as 16 hex digits.
func clusterIDOf(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "IDENTITY"))
	var id uint64
	if err == nil {
		_, err = fmt.Sscanf(string(b), "flint identity 2\ncluster %x\n", &id)
	}
	if err != nil {
		t.Fatalf("the cluster id in %s: %v", dir, err)
	}
	return fmt.Sprintf("%016x", id)
}

// addrOf returns the address of node id in a list id=host:port,...: a
// group's members' client addresses, or the nodes' peer addresses.
func addrOf(t *testing.T, list, id string) string {
	t.Helper()
	for _, m := range strings.Split(list, ",") {
		if n, addr, _ := strings.Cut(m, "="); n == id {
			return addr
		}
	}
	t.Fatalf("no node %s in %s", id, list)
	return ""
}

// transferTo asks the member of members that leads, as FLINT.MEMBER
// TRANSFER finds it (the others answer READONLY), to hand the leadership
// to node id, trying for up to 20 s.
func transferTo(ctx context.Context, t *testing.T, members []string, id string) {
	t.Helper()
	var errs []string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		errs = errs[:0]
		for _, addr := range members {
			rc := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
			err := rc.Do(ctx, "FLINT.MEMBER", "TRANSFER", id).Err()
			rc.Close()
			if err == nil {
				return
			}
			errs = append(errs, fmt.Sprintf("%s: %v", addr, err))
		}
	}
	t.Fatalf("no member handed the leadership to node %s: %v", id, errs)
}

// awaitMaster waits up to 20 s until the member at addr answers a write
// MOVED to leader (unless it is the leader), and its CLUSTER SLOTS and
// CLUSTER NODES name leader as the one master.
func awaitMaster(t *testing.T, addr, leader string) {
	t.Helper()
	ctx := context.Background()
	rc := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rc.Close()
	var state []string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		werr := rc.Set(ctx, "x", "y", 0).Err()
		//lint:ignore SA1019 CLUSTER SLOTS is what go-redis's ClusterClient asks, deprecated or not
		slots, serr := rc.ClusterSlots(ctx).Result()
		nodes, nerr := rc.ClusterNodes(ctx).Result()
		var masters []string
		for _, line := range strings.Split(nodes, "\n") {
			if f := strings.Fields(line); len(f) > 2 && strings.Contains(f[2], "master") {
				masters = append(masters, strings.Split(f[1], "@")[0])
			}
		}
		moved := addr == leader && werr == nil || werr != nil && strings.HasPrefix(werr.Error(), "MOVED ") && strings.HasSuffix(werr.Error(), " "+leader)
		if moved && serr == nil && len(slots) == 1 && len(slots[0].Nodes) > 0 && slots[0].Nodes[0].Addr == leader &&
			nerr == nil && slices.Equal(masters, []string{leader}) {
			return
		}
		state = []string{fmt.Sprint("SET: ", werr), fmt.Sprintf("CLUSTER SLOTS: %v %v", slots, serr), fmt.Sprintf("masters in CLUSTER NODES: %v %v", masters, nerr)}
	}
	t.Fatalf("the member at %s does not name %s as its group's master after 20 s: %v", addr, leader, state)
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
		{[]string{"--id", "1", "--host-nodes", nodes, "--host-groups", "1:1=127.0.0.1:7001", "--managers", "m:1", "--cluster-id", "12ab"}, "--cluster-id \"12ab\": want the cluster's id"},
	} {
		cmd := exec.Command(flintBin, append([]string{"serve"}, c.args...)...)
		cmd.Env = append(os.Environ(), "FLINT_CLUSTER_SECRET=s")
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), c.want) {
			t.Errorf("serve %v: %v, want exit status 2 and %q:\n%s", c.args, err, c.want, out)
		}
	}
}
