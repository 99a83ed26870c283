package multiraft

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/seedtest"
	"github.com/flintkv/flint/internal/snap"
)

// TestRoster: nodes 4, 5 and 6 join a group of three one after the other,
// each added with its info, and then node 4 is removed. Every member
// learns each info as it applies the change that carries it, or, node 5
// that of node 4, from the snapshot it joins by; every member records the
// removal, refuses to add node 4 again, and drops what node 4 sends; a
// restarted member remembers it all, from its snapshot and its log.
func TestRoster(t *testing.T) {
	c := newClusterSegments(t, 3, 1, seedtest.Seed(t), Config{TickInterval: 5 * time.Millisecond, SnapshotEntries: 10}, 1<<10)
	g := c.groups[0]
	hist := &history{}
	c.writeAll(g, c.nodes, hist, valuesFrom("a", 15))
	wantInfo := func(nodes []*node, want map[uint64]string) {
		t.Helper()
		for _, nd := range nodes {
			waitFor(t, fmt.Sprintf("node %d learns the infos %v", nd.id, want), func() bool {
				got := map[uint64]string{}
				for id, info := range nd.host.MemberInfo(g) {
					got[id] = string(info)
				}
				return maps.Equal(got, want)
			})
		}
	}
	add := func(nd *node, voters []*node) {
		t.Helper()
		info := []byte(fmt.Sprintf("node %d's addresses", nd.id))
		if err := c.atLeader(g, voters, func(ctx context.Context, h *Host) error { return h.AddMember(ctx, g, nd.id, info) }); err != nil {
			t.Fatalf("AddMember %d: %v", nd.id, err)
		}
	}
	n4 := c.addNode(g)
	add(n4, c.nodes[:3])
	c.writeAll(g, c.nodes, hist, valuesFrom("b", 15))
	n5 := c.addNode(g)
	add(n5, c.nodes[:4])
	c.writeAll(g, c.nodes, hist, valuesFrom("b5", 15))
	n6 := c.addNode(g)
	add(n6, c.nodes[:5])
	wantInfo(c.nodes, map[uint64]string{4: "node 4's addresses", 5: "node 5's addresses", 6: "node 6's addresses"})
	if n := n5.router.snaps.Load(); n == 0 {
		t.Fatal("node 5 joined without a snapshot: the test does not check that the snapshot carries node 4's info")
	}

	if err := c.atLeader(g, c.nodes, func(ctx context.Context, h *Host) error { return h.RemoveMember(ctx, g, n4.id) }); err != nil {
		t.Fatalf("RemoveMember 4: %v", err)
	}
	st, err := c.leader(g).host.Status(g)
	if err != nil {
		t.Fatal(err)
	}
	removal := st.Applied
	waitFor(t, "node 4 stopped the group", func() bool { return n4.host.group(g) == nil })
	c.stop(n4)
	rest := []*node{c.nodes[0], c.nodes[1], c.nodes[2], n5, n6}
	wantInfo(rest, map[uint64]string{5: "node 5's addresses", 6: "node 6's addresses"})
	readd := func(h *Host) error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return h.AddMember(ctx, g, n4.id, nil)
	}
	for _, nd := range rest {
		waitFor(t, fmt.Sprintf("node %d records node 4's removal", nd.id), func() bool { return errors.Is(readd(nd.host), ErrRemovedID) })
	}

	// A message of node 4's, of a later term, would make a follower
	// follow it: it is dropped.
	lead := c.leader(g)
	follower := rest[slices.IndexFunc(rest, func(nd *node) bool { return nd != lead })]
	st, err = follower.host.Status(g)
	if err != nil {
		t.Fatal(err)
	}
	follower.host.Receive(n4.id, g, []raftpb.Message{{Type: raftpb.MsgHeartbeat, From: n4.id, To: follower.id, Term: st.Term + 5}})
	c.writeAll(g, rest, hist, valuesFrom("c", 25))
	c.checkConverged(g, rest, hist)
	if st2, _ := follower.host.Status(g); st2.Term != st.Term || st2.Lead != lead.id {
		t.Fatalf("after a message from removed node 4 node %d is at term %d, following %d; want term %d, following %d",
			follower.id, st2.Term, st2.Lead, st.Term, lead.id)
	}

	// Node 5 restarts from its snapshot, taken since the removal (the
	// writes above made one), and the log after it.
	c.waitCompacted(g, []*node{n5}, removal)
	c.stop(n5)
	c.start(n5)
	wantInfo([]*node{n5}, map[uint64]string{5: "node 5's addresses", 6: "node 6's addresses"})
	if err := readd(n5.host); !errors.Is(err, ErrRemovedID) {
		t.Fatalf("re-adding node 4 at the restarted node 5: %v, want ErrRemovedID", err)
	}
	c.writeAll(g, rest, hist, []string{"after"})
	c.checkConverged(g, rest, hist)
}

// TestRosterSection: a roster round-trips through its snapshot section,
// an empty one has none, and a damaged one is refused.
func TestRosterSection(t *testing.T) {
	if s := emptyRoster.sections(); s != nil {
		t.Fatalf("an empty roster's sections: %v, want none", s)
	}
	r := emptyRoster.apply(raftpb.ConfChangeV2{Changes: []raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeAddLearnerNode, NodeID: 7}}},
		[]byte("seven"), func(uint64, []byte) {})
	r = r.apply(raftpb.ConfChangeV2{Changes: []raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeRemoveNode, NodeID: 3}}}, nil, func(uint64, []byte) {})
	ss := r.sections()
	got, err := rosterOf(ss)
	if err != nil || string(got.info[7]) != "seven" || len(got.info) != 1 || !slices.Equal(got.removed, []uint64{3}) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	data := ss[0].Data
	for _, bad := range [][]byte{nil, {2}, data[:len(data)-1], append(slices.Clone(data), 0)} {
		if _, err := rosterOf([]snap.Section{{Name: rosterSection, Data: bad}}); err == nil {
			t.Errorf("section data %x taken", bad)
		}
	}
}
