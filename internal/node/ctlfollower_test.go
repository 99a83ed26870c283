package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/flintkv/flint/internal/clusterctl"
)

// TestMapChangeAtFollower moves slots, and then moves them back, through
// clusterctl given only the address of a manager that follows the meta
// group's leader: FLINT.MAPSET there answers MOVED to the leader, which
// clusterctl follows.
func TestMapChangeAtFollower(t *testing.T) {
	c := newSimCluster(t, 1, 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	all, err := clusterctl.Dial(clusterctl.Config{Addrs: c.managers()})
	if err != nil {
		t.Fatal(err)
	}
	awaitMap(t, ctx, all)
	meta := c.group(0)
	var follower string
	for deadline := time.Now().Add(20 * time.Second); follower == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if lead := meta.leader(); lead != nil {
			follower = meta.members[lead.id%simMembers].addr
		}
	}
	if follower == "" {
		t.Fatal("no manager leads after 20 s")
	}
	ctl, err := clusterctl.Dial(clusterctl.Config{Addrs: []string{follower}})
	if err != nil {
		t.Fatal(err)
	}
	for _, to := range []uint64{2, 1} {
		if err := ctl.MoveSlots(ctx, 0, 9, to); err != nil {
			t.Fatalf("moving slots 0-9 to group %d at the follower %s: %v", to, follower, err)
		}
		m := finalMap(t, ctx, all, 0)
		for s := 0; s <= 9; s++ {
			if o := m.Owner(s); o == nil || o.ID != to {
				t.Fatalf("slot %d belongs to %v after its move to group %d", s, o, to)
			}
		}
	}
}
