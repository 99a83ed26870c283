package multiraft

import (
	"context"
	"testing"
	"time"

	"github.com/flintkv/flint/internal/seedtest"
)

// startGroup starts group g on running node nd, as a node started with it
// would (AddGroup with the cluster's first members), and makes it one of
// the groups nd hosts on its later starts.
func (c *cluster) startGroup(nd *node, g uint64) {
	c.t.Helper()
	nd.lists[g] = &list{}
	if err := nd.host.AddGroup(g, c.boot, nd.lists[g]); err != nil {
		c.t.Fatalf("node %d: AddGroup(%d) while running: %v", nd.id, g, err)
	}
	nd.groups = append(nd.groups[:len(nd.groups):len(nd.groups)], g)
}

// TestAddGroupWhileRunning starts a second group on three running hosts,
// one host after another, while the first group takes writes: once two
// run it the group elects and takes writes, the third catches up, and a
// host restarted afterwards restores it (from its snapshots and log) with
// the first. Starting it again on a host that runs it is refused, and the
// first group is untouched.
func TestAddGroupWhileRunning(t *testing.T) {
	c := newClusterSegments(t, 3, 1, seedtest.Seed(t), Config{TickInterval: 5 * time.Millisecond, SnapshotEntries: 10}, 1<<10)
	old, g := c.groups[0], uint64(2)
	oldHist, hist := &history{}, &history{}
	c.writeAll(old, c.nodes, oldHist, valuesFrom("a", 20))

	c.startGroup(c.nodes[0], g)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	if _, err := c.nodes[0].host.Propose(ctx, g, []byte("alone")); err == nil {
		t.Fatal("a group that one of its three members runs took a write")
	}
	cancel()
	c.startGroup(c.nodes[1], g)
	c.writeAll(g, c.nodes[:2], hist, valuesFrom("b", 30))
	c.writeAll(old, c.nodes, oldHist, valuesFrom("c", 5))
	c.startGroup(c.nodes[2], g)
	c.writeAll(g, c.nodes, hist, valuesFrom("d", 10))
	c.checkConverged(g, c.nodes, hist)

	if err := c.nodes[2].host.AddGroup(g, c.boot, &list{}); err == nil {
		t.Fatal("AddGroup of a group the host runs already succeeded")
	}
	n3 := c.nodes[2]
	c.stop(n3)
	c.writeAll(g, c.nodes[:2], hist, valuesFrom("e", 10))
	c.start(n3)
	c.writeAll(g, c.nodes, hist, valuesFrom("f", 5))
	c.checkConverged(g, c.nodes, hist)
	c.checkConverged(old, c.nodes, oldHist)
}
