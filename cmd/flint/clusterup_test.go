package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestClusterUpKeepsMap: the managers of `flint cluster up --groups` keep
// the map in their log. Keys are written, slots move (and, hosted, group
// 3 is added by a split, which add-group run again finds done); `cluster
// up` is stopped with SIGINT and started again on the same directory:
// CLUSTER SLOTS gives each slot to the group it moved to, and every key
// reads back. Then a manager alone is killed with kill -9 and started
// again with its flags: the same. Hosted on three nodes with one manager,
// and a process per member with three managers.
func TestClusterUpKeepsMap(t *testing.T) {
	for _, c := range []struct {
		name     string
		args     []string
		managers int
	}{
		{"hosted", []string{"--hosted", "--nodes", "3", "--groups", "2"}, 1},
		{"process per member", []string{"--nodes", "1", "--groups", "2", "--managers", "3"}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "cluster")
			args := append(c.args, "--dir", dir)
			up, addrs, _ := clusterUpArgs(t, args...)
			manager := strings.Join(addrs[:c.managers], ",")
			writeKeys(t, addrs[0], 100)
			clusterChange(t, nil, "slots 0-1000 belong to group 2", "move-slots", "--addr", manager, "--slots", "0-1000", "--to", "2", "--timeout", "1m")
			if split := c.managers == 1; split { // hosted: add-group --hosted starts the group itself
				a := freeAddrs(t, 3)
				members := fmt.Sprintf("1=%s,2=%s,3=%s", a[0], a[1], a[2])
				clusterChange(t, nil, "group 3 was added", "add-group", "--hosted", "--addr", manager, "--group", "3", "--members", members, "--timeout", "1m")
				clusterChange(t, nil, "the split is done: group 3 is in the map already, with these members, and owns 4596 slots, none of them moving; nothing changed",
					"add-group", "--hosted", "--addr", manager, "--group", "3", "--members", members, "--timeout", "1m")
			}
			want := slotOwners(t, addrs[0], "")
			if !strings.Contains(want, "0-1000:2 ") {
				t.Fatalf("slots 0-1000 did not move to group 2: %s", want)
			}

			stopClusterUp(up)
			_, addrs, _ = clusterUpArgs(t, args...)
			slotOwners(t, addrs[0], want)
			readKeys(t, addrs[0], 100)

			mdir := filepath.Join(dir, "manager")
			if c.managers > 1 {
				mdir += "1"
			}
			restartNode(t, killNode(t, mdir), readLayout(t, dir).Secret)
			slotOwners(t, addrs[0], want)
			readKeys(t, addrs[0], 100)
		})
	}
}

// writeKeys sets k0 to k<n-1> through a ClusterClient of the cluster at
// addr.
func writeKeys(t *testing.T, addr string, n int) {
	t.Helper()
	cc := clusterClient([]string{addr})
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range n {
		if err := cc.Set(ctx, fmt.Sprint("k", i), fmt.Sprint(i), 0).Err(); err != nil {
			t.Fatalf("SET k%d: %v", i, err)
		}
	}
}

// readKeys reads k0 to k<n-1> back through a ClusterClient of the cluster
// at addr, each retried for up to 20 s while the cluster starts.
func readKeys(t *testing.T, addr string, n int) {
	t.Helper()
	cc := clusterClient([]string{addr})
	defer cc.Close()
	deadline := time.Now().Add(20 * time.Second)
	for i := range n {
		key, want := fmt.Sprint("k", i), fmt.Sprint(i)
		v, err := cc.Get(context.Background(), key).Result()
		for ; (err != nil || v != want) && time.Now().Before(deadline); v, err = cc.Get(context.Background(), key).Result() {
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil || v != want {
			t.Fatalf("GET %s = %q (%v), want %s", key, v, err, want)
		}
	}
}

// slotOwners returns the manager at addr's CLUSTER SLOTS as "first-last:group "
// for each range, in order. Given want, it waits for up to 20 s until that
// is what they are.
func slotOwners(t *testing.T, addr, want string) string {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	var got string
	var err error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var slots []redis.ClusterSlot
		//lint:ignore SA1019 CLUSTER SLOTS is what go-redis's ClusterClient asks, deprecated or not
		if slots, err = c.ClusterSlots(context.Background()).Result(); err != nil {
			continue
		}
		slices.SortFunc(slots, func(a, b redis.ClusterSlot) int { return a.Start - b.Start })
		var b strings.Builder
		for _, s := range slots {
			var group int
			fmt.Sscanf(s.Nodes[0].ID[:24], "%x", &group) // a node id's first 24 hex digits are its group's id
			fmt.Fprintf(&b, "%d-%d:%d ", s.Start, s.End, group)
		}
		if got = b.String(); want == "" || got == want {
			return got
		}
	}
	t.Fatalf("CLUSTER SLOTS at %s: %s (%v), want %s", addr, got, err, want)
	return ""
}
