package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flintkv/flint/internal/ask"
)

// TestClusterCreate starts a manager with no map and three data nodes,
// one per group, which answer CLUSTERDOWN; `flint cluster create` refuses
// bad arguments (an address nothing answers at, a node named twice, a node
// named as what it is not, a node that follows other managers, two
// managers that keep their maps in memory, each its own meta group),
// changing nothing, then creates the cluster: a go-redis ClusterClient writes and
// reads a key of every group. A second create is refused.
func TestClusterCreate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	addrs := freeAddrs(t, 7)
	manager, data, stray, nobody, manager2 := addrs[0], addrs[1:4], addrs[4], addrs[5], addrs[6]
	p := newProcs(t, "serve")
	ids := []int{p.add(manager, "--manager", "--addr", manager, "--huge-pages=false"),
		p.add(manager2, "--manager", "--addr", manager2, "--huge-pages=false")}
	for i, a := range data {
		ids = append(ids, p.add(a, "--shard-group", fmt.Sprint(i+1), "--managers", manager, "--addr", a,
			"--dir", filepath.Join(t.TempDir(), fmt.Sprint("g", i+1)), "--huge-pages=false"))
	}
	ids = append(ids, p.add(stray, "--shard-group", "1", "--managers", nobody, "--addr", stray,
		"--dir", filepath.Join(t.TempDir(), "stray"), "--huge-pages=false"))
	p.start(ids...)
	c := redis.NewClient(&redis.Options{Addr: data[0]})
	defer c.Close()
	if err := c.Set(ctx, "b", "v", 0).Err(); err == nil || err.Error() != "CLUSTERDOWN The cluster is down" {
		t.Fatalf("SET at a data node before the cluster is created: %v, want CLUSTERDOWN", err)
	}

	if out, code := runFlint(t, flintBin, nil, "cluster", "status", "--addr", manager); code != 1 || !strings.Contains(out, "the managers hold no cluster map yet") {
		t.Errorf("flint cluster status before create: exit %d:\n%s", code, out)
	}
	servers := strings.Join(data, ",")
	for _, bad := range []struct {
		want string
		args []string
	}{
		{"no Flint process answers at " + nobody, []string{"--servers", data[0] + "," + nobody + "," + data[2]}},
		{data[1] + " is named twice: as a member of group 2 and as a member of group 3", []string{"--servers", data[0] + "," + data[1] + "," + data[1]}},
		{data[1] + " is a data node of group 2, but is named as a data node of group 1", []string{"--servers", data[1] + "," + data[0] + "," + data[2]}},
		{data[2] + " is a data node of group 3, but is named as a manager", []string{"--servers", data[0] + "," + data[1], "--addr", data[2]}},
		{stray + " follows the managers " + nobody + ", not only those named (" + manager + "): it belongs to another cluster",
			[]string{"--servers", stray + "," + data[1] + "," + data[2]}},
		{"--servers must list --replicas (2) addresses for each data group, got 3", []string{"--servers", servers, "--replicas", "2"}},
		{"the manager at " + manager + " is the one member of its meta group (it keeps its map in memory, or its group has one member)",
			[]string{"--servers", servers, "--addr", manager + "," + manager2}},
	} {
		args := append([]string{"cluster", "create", "--addr", manager, "--timeout", "20s"}, bad.args...)
		out, code := runFlint(t, flintBin, nil, args...)
		if code == 0 || !strings.Contains(out, bad.want) {
			t.Errorf("flint %s: exit %d, want an error %q:\n%s", strings.Join(args, " "), code, bad.want, out)
		}
	}
	for _, a := range []string{manager, manager2, data[0]} {
		if info := infoCluster(ctx, t, a); !strings.Contains(info, "flint_shard_epoch:0\r\n") {
			t.Fatalf("after the refused creates, %s's INFO cluster holds a map:\n%s", a, info)
		}
	}

	out := clusterChange(t, nil, "the cluster of 3 data groups was created", "create", "--addr", manager, "--servers", servers, "--timeout", "1m")
	for _, slots := range []string{"0-5460", "5461-10922", "10923-16383"} {
		if !strings.Contains(out, " "+slots+" ") {
			t.Errorf("create's status has no group of slots %s:\n%s", slots, out)
		}
	}
	for _, a := range data {
		if info := infoCluster(ctx, t, a); !strings.Contains(info, "flint_shard_epoch:1\r\n") {
			t.Errorf("once create returned, %s's INFO cluster has no map of epoch 1:\n%s", a, info)
		}
	}
	checkEveryGroup(ctx, t, manager, len(data))

	out, code := runFlint(t, flintBin, nil, "cluster", "create", "--addr", manager, "--servers", servers, "--timeout", "20s")
	if want := "the cluster has a map already (epoch 1, at manager " + manager + ")"; code != 1 || !strings.Contains(out, want) {
		t.Errorf("a second create: exit %d, want an error %q:\n%s", code, want, out)
	}
}

// TestClusterCreateReplicated creates a cluster whose managers are a meta
// group of three, started with no map, and whose one data group has three
// members, with two creates run at once that list the members in
// opposite orders: one wins and the other is refused. Each member's id in
// the map is its own.
func TestClusterCreateReplicated(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	t.Setenv("FLINT_CLUSTER_SECRET", "create-test")
	addrs := freeAddrs(t, 12)
	managers, data := addrs[0:3], addrs[3:6]
	members := func(clients, peers []string) string {
		var ms []string
		for i := range clients {
			ms = append(ms, fmt.Sprintf("%d=%s@%s", i+1, clients[i], peers[i]))
		}
		return strings.Join(ms, ",")
	}
	p := newProcs(t, "serve")
	var ids []int
	for i, a := range managers {
		ids = append(ids, p.add(a, "--manager", "--id", fmt.Sprint(i+1), "--initial-members", members(managers, addrs[6:9]),
			"--dir", filepath.Join(t.TempDir(), fmt.Sprint("m", i)), "--huge-pages=false"))
	}
	for i, a := range data {
		ids = append(ids, p.add(a, "--shard-group", "1", "--managers", strings.Join(managers, ","), "--id", fmt.Sprint(i+1),
			"--initial-members", members(data, addrs[9:12]), "--dir", filepath.Join(t.TempDir(), fmt.Sprint("d", i)), "--huge-pages=false"))
	}
	p.start(ids...)

	out, code := runFlint(t, flintBin, nil, "cluster", "create", "--addr", strings.Join(managers[:2], ","), "--servers", strings.Join(data, ","),
		"--replicas", "3", "--timeout", "1m")
	if want := "name every one of"; code != 1 || !strings.Contains(out, want) {
		t.Fatalf("create naming two of the three managers: exit %d, want 1 and %q:\n%s", code, want, out)
	}

	reversed := slices.Clone(data)
	slices.Reverse(reversed)
	orders := []string{strings.Join(data, ","), strings.Join(reversed, ",")}
	outs, codes := make([]string, 2), make([]int, 2)
	var wg sync.WaitGroup
	for i, servers := range orders {
		wg.Go(func() {
			c := exec.Command(flintBin, "cluster", "create", "--addr", strings.Join(managers, ","), "--servers", servers,
				"--replicas", "3", "--timeout", "1m")
			out, _ := c.CombinedOutput()
			outs[i], codes[i] = string(out), c.ProcessState.ExitCode()
		})
	}
	wg.Wait()
	won := slices.Index(codes, 0)
	if won < 0 || codes[1-won] != 1 || !containsAny(outs[1-won], "has a map already", "got a map meanwhile", "belongs to a cluster already") {
		t.Fatalf("two creates at once: exits %v, want one 0 and one refused:\n%s\n%s", codes, outs[0], outs[1])
	}
	t.Logf("the create that won:\n%s\nthe other:\n%s", outs[won], outs[1-won])
	m, _, _, err := ask.Map(ctx, managers[1], "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, mb := range m.Groups[0].Members {
		if data[mb.ID-1] != mb.Addr {
			t.Errorf("the map gives %s member id %d, not its own", mb.Addr, mb.ID)
		}
		got = append(got, mb.Addr)
	}
	if strings.Join(got, ",") != orders[won] {
		t.Errorf("the managers' map lists the members %v, not as the create that won did (%s)", got, orders[won])
	}
	checkEveryGroup(ctx, t, managers[2], 1)
}

// containsAny reports whether s contains any of subs.
func containsAny(s string, subs ...string) bool {
	return slices.ContainsFunc(subs, func(sub string) bool { return strings.Contains(s, sub) })
}

// checkEveryGroup writes and reads, through a go-redis ClusterClient that
// starts from addr, a key in the slots of each of the n groups of a map
// whose slots are split evenly.
func checkEveryGroup(ctx context.Context, t *testing.T, addr string, n int) {
	t.Helper()
	cc := clusterClient([]string{addr})
	defer cc.Close()
	done := map[int]bool{}
	for i := 0; len(done) < n && i < 1000; i++ {
		key := fmt.Sprint("key", i)
		if g := partitionOf(key, n); !done[g] {
			done[g] = true
			if err := cc.Set(ctx, key, key, 0).Err(); err != nil {
				t.Fatalf("SET %s (group %d): %v", key, g+1, err)
			}
			if v, err := cc.Get(ctx, key).Result(); err != nil || v != key {
				t.Fatalf("GET %s (group %d) = %q, %v; want %q", key, g+1, v, err, key)
			}
		}
	}
	if len(done) < n {
		t.Fatalf("keys for only %d of %d groups", len(done), n)
	}
}

// infoCluster returns the INFO cluster of the node at addr.
func infoCluster(ctx context.Context, t *testing.T, addr string) string {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	info, err := c.Info(ctx, "cluster").Result()
	if err != nil {
		t.Fatalf("INFO cluster at %s: %v", addr, err)
	}
	return info
}
