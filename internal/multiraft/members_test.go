package multiraft

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/flintkv/flint/internal/seedtest"
	"github.com/flintkv/flint/internal/transport/transporttest"
)

// atLeader calls change at whichever of nodes leads group g, until one
// call succeeds or 30 s have passed; errors that say to try again (no
// leader here, an outcome unknown, a change refused) are tried again.
func (c *cluster) atLeader(g uint64, nodes []*node, change func(context.Context, *Host) error) error {
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, nd := range nodes {
			if h := nd.host; h != nil && h.Leader(g) == nd.id {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				err = change(ctx, h)
				cancel()
				if err == nil || !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrUnknownState) && !errors.Is(err, ErrChangeRefused) && !errors.Is(err, ErrChangeInProgress) {
					return err
				}
			}
		}
	}
	return fmt.Errorf("no leader made the change in 30 s; the last error: %v", err)
}

// leader waits for a node that leads group g, as it sees itself, and
// returns it.
func (c *cluster) leader(g uint64) *node {
	c.t.Helper()
	var lead *node
	waitFor(c.t, fmt.Sprintf("a leader of group %d", g), func() bool {
		for _, nd := range c.nodes {
			if nd.host != nil && nd.host.Leader(g) == nd.id {
				lead = nd
				return true
			}
		}
		return false
	})
	return lead
}

func hostsOf(nodes []*node) func() []*Host {
	return func() []*Host {
		var hs []*Host
		for _, nd := range nodes {
			hs = append(hs, nd.host)
		}
		return hs
	}
}

// history is what a test wrote to a group: the values acknowledged, and
// those whose outcome is unknown (a leader lost, a proposal that took
// longer than its context, as under load).
type history struct{ acked, maybe []string }

// writeAll writes values to group g through nodes, adding each to hist; a
// value that no leader took fails the test.
func (c *cluster) writeAll(g uint64, nodes []*node, hist *history, values []string) {
	c.t.Helper()
	for _, v := range values {
		switch by, maybe := c.write(g, v, hostsOf(nodes)); {
		case by != nil:
			hist.acked = append(hist.acked, v)
		case maybe:
			hist.maybe = append(hist.maybe, v)
		default:
			c.t.Fatalf("group %d: no leader took the write of %q", g, v)
		}
	}
}

// checkConverged waits until each of nodes passed a read barrier of group
// g, so that it applied every write acknowledged, then until they applied
// the same values, and checks those against hist (see checkValues). It
// returns them.
func (c *cluster) checkConverged(g uint64, nodes []*node, hist *history) []string {
	c.t.Helper()
	for _, nd := range nodes {
		waitFor(c.t, fmt.Sprintf("a read barrier of group %d at node %d", g, nd.id), func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			return nd.host.ReadBarrier(ctx, g) == nil
		})
	}
	final := c.convergedAt(g, nodes)
	checkValues(c.t, g, final, hist.acked, hist.maybe)
	return final
}

func valuesFrom(prefix string, n int) []string {
	var vs []string
	for k := range n {
		vs = append(vs, fmt.Sprintf("%s%d", prefix, k))
	}
	return vs
}

// TestMembership adds a fourth node to a group of three, whose logs were
// compacted, so that it catches up by snapshot; hands it the leadership;
// removes the first node, which stops the group (and only that group);
// and restarts the new member, which comes back as a voter.
func TestMembership(t *testing.T) {
	c := newClusterSegments(t, 3, 2, seedtest.Seed(t), Config{TickInterval: 5 * time.Millisecond, SnapshotEntries: 10}, 1<<10)
	g, other := c.groups[0], c.groups[1]
	hist := &history{}
	c.writeAll(g, c.nodes, hist, valuesFrom("a", 30))
	c.waitCompacted(g, c.nodes, 0)
	n4 := c.addNode(g)
	if err := c.atLeader(g, c.nodes[:3], func(ctx context.Context, h *Host) error { return h.AddMember(ctx, g, n4.id, nil) }); err != nil {
		t.Fatalf("AddMember: %v", err)
	}
	final := c.checkConverged(g, c.nodes, hist)
	if n := n4.lists[g].appliedSince(); n >= len(final) {
		t.Fatalf("the new member applied all %d entries: it caught up without a snapshot, though the leader's log was compacted", n)
	}
	if err := c.atLeader(g, c.nodes[:3], func(ctx context.Context, h *Host) error { return h.TransferLeadership(ctx, g, n4.id) }); err != nil {
		t.Fatalf("TransferLeadership: %v", err)
	}
	if l := n4.host.Leader(g); l != n4.id {
		t.Fatalf("after TransferLeadership node %d sees %d lead", n4.id, l)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n4.host.RemoveMember(ctx, g, 1); err != nil {
		t.Fatalf("RemoveMember: %v", err)
	}
	n1 := c.nodes[0]
	waitFor(t, "node 1 stopped the group it was removed from", func() bool { return n1.host.group(g) == nil })
	if _, err := n1.host.Propose(ctx, g, []byte("x")); !errors.Is(err, ErrNoGroup) {
		t.Fatalf("a proposal at the removed node: %v, want ErrNoGroup", err)
	}
	if err := n4.host.RemoveMember(ctx, g, 1); !errors.Is(err, ErrNoMember) {
		t.Fatalf("removing node 1 again: %v, want ErrNoMember", err)
	}
	rest := c.nodes[1:]
	c.writeAll(g, rest, hist, valuesFrom("b", 15))
	c.checkConverged(g, rest, hist)
	c.writeAll(other, c.nodes[:3], &history{}, []string{"still"})
	c.stop(n4)
	c.start(n4)
	c.writeAll(g, rest, hist, []string{"after"})
	c.checkConverged(g, rest, hist)
	if err := c.atLeader(g, rest, func(ctx context.Context, h *Host) error { return h.TransferLeadership(ctx, g, n4.id) }); err != nil {
		t.Fatalf("the restarted member does not take the leadership: %v", err)
	}
}

// TestMembershipWithFaults adds a fourth node to a group and removes the
// first while writes go on, through the seeded message faults and
// isolations of the fault test: the changes are made, and the final
// members hold every acknowledged write once, in order, at the same
// indexes.
func TestMembershipWithFaults(t *testing.T) {
	seed := seedtest.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	c := newClusterSegments(t, 3, 1, seed, Config{TickInterval: 5 * time.Millisecond, Workers: 3, SnapshotEntries: 10}, 4<<10)
	g := c.groups[0]
	n4 := c.addNode(g)
	c.net.SetFaults(transporttest.Faults{Drop: 0.05, Duplicate: 0.02, Reorder: 0.02, MaxDelay: 2 * time.Millisecond})
	hist := &history{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, v := range valuesFrom("v", 80) {
			by, m := c.write(g, v, hostsOf(c.nodes))
			if by != nil {
				hist.acked = append(hist.acked, v)
			} else if m {
				hist.maybe = append(hist.maybe, v)
			}
		}
	}()
	var changes sync.WaitGroup
	var addErr, removeErr error
	changes.Add(1)
	go func() {
		defer changes.Done()
		addErr = c.atLeader(g, c.nodes, func(ctx context.Context, h *Host) error { return h.AddMember(ctx, g, n4.id, nil) })
		if addErr != nil {
			return
		}
		removeErr = c.atLeader(g, c.nodes, func(ctx context.Context, h *Host) error {
			err := h.RemoveMember(ctx, g, 1)
			if errors.Is(err, ErrNoMember) || errors.Is(err, ErrNoGroup) {
				return nil // an earlier try was applied
			}
			return err
		})
	}()
	isolations := 0
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-time.After(20 * time.Millisecond):
			if rng.IntN(10) < 2 {
				c.net.Isolate(c.nodes[rng.IntN(len(c.nodes))].id)
				isolations++
			} else {
				c.net.Heal()
			}
		}
	}
	c.net.Heal()
	c.net.SetFaults(transporttest.Faults{})
	changes.Wait()
	if addErr != nil || removeErr != nil {
		t.Fatalf("AddMember: %v; RemoveMember: %v", addErr, removeErr)
	}
	waitFor(t, "node 1 stopped the group it was removed from", func() bool { return c.nodes[0].host.group(g) == nil })
	c.checkConverged(g, c.nodes[1:], hist)
	t.Logf("%d writes acknowledged, %d of unknown outcome, through %d isolations; %d snapshots to node 4", len(hist.acked), len(hist.maybe), isolations, n4.router.snaps.Load())
}

// TestMembershipRefusals: a change while another is being made through
// the same node is refused, as is one that names no member; a change that
// cannot commit (its leader cut off) ends with its context, its outcome
// unknown, and is made once the network heals.
func TestMembershipRefusals(t *testing.T) {
	c := newClusterSegments(t, 3, 1, seedtest.Seed(t), Config{TickInterval: 5 * time.Millisecond, SnapshotEntries: 10}, 4<<10)
	g := c.groups[0]
	hist := &history{}
	c.writeAll(g, c.nodes, hist, []string{"a"})
	lead := c.leader(g)
	ctx := context.Background()
	if err := lead.host.RemoveMember(ctx, g, 9); !errors.Is(err, ErrNoMember) {
		t.Fatalf("removing a node that is no member: %v, want ErrNoMember", err)
	}
	if err := lead.host.TransferLeadership(ctx, g, 9); !errors.Is(err, ErrNoMember) {
		t.Fatalf("handing the leadership to a node that is no member: %v, want ErrNoMember", err)
	}
	n4 := c.addNode(g)
	c.net.Isolate(lead.id)
	first := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		first <- lead.host.AddMember(ctx, g, n4.id, nil)
	}()
	waitFor(t, "the first change proposed", func() bool {
		gr := lead.host.group(g)
		gr.mu.Lock()
		defer gr.mu.Unlock()
		return gr.changing != nil
	})
	if err := lead.host.RemoveMember(ctx, g, c.nodes[0].id); !errors.Is(err, ErrChangeInProgress) && !errors.Is(err, ErrNotLeader) {
		t.Fatalf("a second change while the first is made: %v, want ErrChangeInProgress (or ErrNotLeader, once the cut-off leader stepped down)", err)
	}
	if err := <-first; !errors.Is(err, ErrUnknownState) && !errors.Is(err, ErrNotLeader) {
		t.Fatalf("a change its cut-off leader cannot commit: %v, want ErrUnknownState", err)
	}
	c.net.Heal()
	if err := c.atLeader(g, c.nodes, func(ctx context.Context, h *Host) error { return h.AddMember(ctx, g, n4.id, nil) }); err != nil {
		t.Fatalf("AddMember once healed: %v", err)
	}
	c.writeAll(g, c.nodes, hist, []string{"b"})
	c.checkConverged(g, c.nodes, hist)
}
