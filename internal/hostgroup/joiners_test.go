package hostgroup

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flintkv/flint/internal/server"
)

// TestJoiners: nodes 4 and 5 join a group of three one after the other,
// each added with FLINT.MEMBER ADD at the leader. Every node learns both
// new members' addresses from the changes' entries (its transport is
// pointed at their peer addresses, its view has their client addresses),
// so once node 5 leads, every other member, node 4 among them, answers a
// write MOVED to node 5's client address. Node 4 is then removed, and
// adding it back is refused. Every acknowledged write reads back at both
// new nodes.
func TestJoiners(t *testing.T) {
	c := startCluster(t, 1)
	ctx := context.Background()
	var keys []string
	write := func(addr, prefix string) {
		t.Helper()
		rc := client(t, addr)
		for i := range 20 {
			k := fmt.Sprintf("%s-%d", prefix, i)
			if err := rc.Set(ctx, k, k, 0).Err(); err != nil {
				t.Fatalf("SET %s at %s: %v", k, addr, err)
			}
			keys = append(keys, k)
		}
	}
	member := func(lead *testNode, args ...any) error {
		return client(t, c.addrs[1][lead.id]).Do(ctx, append([]any{"FLINT.MEMBER"}, args...)...).Err()
	}
	join := func(n uint64) *testNode {
		t.Helper()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		c.addrs[1][n] = ln.Addr().String()
		lead := c.leader(t, 1)
		nd := c.startNode(t, n, []uint64{1, 2, 3}, map[uint64]map[uint64]net.Listener{1: {n: ln}})
		if err := member(lead, "ADD", n, fmt.Sprintf("%s@peer%d:7000", c.addrs[1][n], n)); err != nil {
			t.Fatalf("FLINT.MEMBER ADD %d: %v", n, err)
		}
		write(c.addrs[1][c.leader(t, 1).id], fmt.Sprint("after", n))
		return nd
	}
	write(c.addrs[1][c.leader(t, 1).id], "before")
	n4 := join(4)
	n5 := join(5)
	want := map[uint64]string{4: c.addrs[1][4] + "@peer4:7000", 5: c.addrs[1][5] + "@peer5:7000"}
	for _, nd := range c.nodes {
		waitUntil(t, fmt.Sprintf("node %d learns both new members' addresses", nd.id), func() bool {
			got := map[uint64]string{}
			nd.learned.Range(func(k, v any) bool { got[k.(uint64)] = v.(string); return true })
			return maps.Equal(got, want)
		})
	}

	if err := member(c.leader(t, 1), "TRANSFER", 5); err != nil {
		t.Fatalf("FLINT.MEMBER TRANSFER 5: %v", err)
	}
	if got := c.leader(t, 1); got != n5 {
		t.Fatalf("node %d leads after the transfer to node 5", got.id)
	}
	for _, nd := range c.nodes[:4] {
		err := client(t, c.addrs[1][nd.id]).Set(ctx, "x", "y", 0).Err()
		if err == nil || !strings.HasPrefix(err.Error(), "MOVED ") || !strings.HasSuffix(err.Error(), " "+c.addrs[1][5]) {
			t.Fatalf("SET at node %d while node 5 leads = %v, want MOVED to %s", nd.id, err, c.addrs[1][5])
		}
		var ids []uint64
		for _, m := range nd.backends[1].ClusterView().Members {
			if m.Addr != c.addrs[1][m.ID] {
				t.Fatalf("node %d's view has member %d at %q, want %q", nd.id, m.ID, m.Addr, c.addrs[1][m.ID])
			}
			ids = append(ids, m.ID)
		}
		if !slices.Equal(ids, []uint64{1, 2, 3, 4, 5}) {
			t.Fatalf("node %d's view has the members %v, want 1 to 5", nd.id, ids)
		}
	}
	write(c.addrs[1][5], "led")
	for _, nd := range []*testNode{n4, n5} {
		rc := redis.NewClient(&redis.Options{Addr: c.addrs[1][nd.id], MaxRetries: -1,
			OnConnect: func(ctx context.Context, cn *redis.Conn) error { return cn.ReadOnly(ctx).Err() }})
		t.Cleanup(func() { rc.Close() })
		for _, k := range keys {
			if v, err := rc.Get(ctx, k).Result(); err != nil || v != k {
				t.Fatalf("GET %s at node %d = %q, %v", k, nd.id, v, err)
			}
		}
	}

	if err := member(n5, "REMOVE", 4); err != nil {
		t.Fatalf("FLINT.MEMBER REMOVE 4: %v", err)
	}
	err := member(n5, "ADD", 4, c.addrs[1][4]+"@peer4:7000")
	if err == nil || !strings.Contains(err.Error(), "removed from the group") {
		t.Fatalf("FLINT.MEMBER ADD of removed node 4 = %v, want a refusal naming the removal", err)
	}
	write(c.addrs[1][5], "removed")
	waitUntil(t, "node 1's view drops node 4", func() bool {
		return !slices.ContainsFunc(c.nodes[0].backends[1].ClusterView().Members, func(m server.ClusterMember) bool { return m.ID == 4 })
	})
}

// waitUntil polls cond every 10 ms until it holds, failing after 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
	}
}
