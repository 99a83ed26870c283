package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestHostedAddGroup runs `flint cluster up --hosted --nodes 3 --groups 2`
// and splits it with `flint cluster add-group --hosted`, which starts group
// 3 on the three running nodes, each member on a new client port, while a
// go-redis ClusterClient writes. Bad add-groups are refused first, and
// change nothing. Node 2 is then killed with kill -9 and started again
// with the same flags: it hosts group 3 again (from its GROUPS file), and
// add-group run again (--from the group it split) finds it done. Every acknowledged write reads
// back, through the cluster and, linearizably, at node 2's member of the
// group that owns it; group 3 took some; CLUSTER SLOTS shows three groups.
func TestHostedAddGroup(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cluster")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	_, addrs, _ := clusterUpArgs(t, "--hosted", "--nodes", "3", "--groups", "2", "--dir", dir)
	manager, l := addrs[0], readLayout(t, dir)
	cc := clusterClient(addrs[:1])
	defer cc.Close()
	w := startWriter(ctx, t, cc)
	w.await(50, "")

	a := freeAddrs(t, 3)
	members := fmt.Sprintf("1=%s,2=%s,3=%s", a[0], a[1], a[2])
	inUse := strings.Split(strings.Split(l.Hosted[0], ",")[0], "=")[1] // node 1's member of group 1
	for _, bad := range []struct{ members, group, from, want string }{
		{members, "1", "0", "group 1 is in the map already, with other members"},
		{members, "3", "7", "no group 7 to take slots from"},
		{"1=" + a[0] + ",9=" + a[1] + ",3=" + a[2], "3", "0", "node 9 hosts no member of the cluster's groups"},
		{"1=" + a[0], "3", "0", "group 3 would have 1 members, fewer than the 3 of group 1"},
		{"1=" + inUse + ",2=" + a[1] + ",3=" + a[2], "3", "0", "node 1 (at "},
	} {
		out, code := runFlint(t, flintBin, nil, "cluster", "add-group", "--hosted", "--addr", manager, "--group", bad.group, "--members", bad.members,
			"--from", bad.from)
		if code != 1 || !strings.Contains(out, bad.want) {
			t.Fatalf("add-group --group %s --members %s --from %s: exit %d, want 1 and %q:\n%s", bad.group, bad.members, bad.from, code, bad.want, out)
		}
	}
	clusterChange(t, nil, ": 2 groups, 16384 of 16384 slots assigned", "status", "--addr", manager)

	out := clusterChange(t, nil, "group 3 was added", "add-group", "--hosted", "--addr", manager, "--group", "3", "--members", members, "--timeout", "1m")
	if !strings.Contains(out, "3      4096-8191 ") {
		t.Errorf("group 3 does not own the upper half of group 1's slots:\n%s", out)
	}
	w.await(50, "")

	node2 := filepath.Join(dir, "n2")
	args := killNode(t, node2)
	w.await(50, "") // the other two nodes are a majority of every group
	restartNode(t, args, l.Secret)
	w.await(50, "")
	out = clusterChange(t, nil, "group 3 was added", "add-group", "--hosted", "--addr", manager, "--group", "3", "--members", members,
		"--from", "1", "--timeout", "1m")
	if !strings.Contains(out, "3      4096-8191 ") {
		t.Errorf("add-group run again moved slots:\n%s", out)
	}
	w.await(50, "")
	served, _ := w.stop()

	at2 := append(node2Members(t, dir), redis.NewClient(&redis.Options{Addr: a[1], MaxRetries: -1,
		OnConnect: func(ctx context.Context, cn *redis.Conn) error { return cn.ReadOnly(ctx).Err() }}))
	defer at2[2].Close()
	held := make([]int, len(at2))
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
		held[readAtOwner(ctx, t, at2, key, want)]++
	}
	if held[2] == 0 {
		t.Errorf("group 3 holds none of the %d acknowledged writes (by group: %v)", acked, held)
	}
	//lint:ignore SA1019 CLUSTER SLOTS is what go-redis's ClusterClient asks, deprecated or not
	slots, err := cc.ClusterSlots(ctx).Result()
	groups := map[string]bool{}
	for _, s := range slots {
		groups[s.Nodes[0].ID[:24]] = true // a node id's first 24 hex digits are its group's id
	}
	if err != nil || len(groups) != 3 {
		t.Errorf("CLUSTER SLOTS names %d groups, want 3 (%v): %+v", len(groups), err, slots)
	}
	t.Logf("%d acknowledged writes, by group %v", acked, held)
}
