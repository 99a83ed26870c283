package node_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/flintkv/flint/client"
	"github.com/flintkv/flint/internal/ask"
	"github.com/flintkv/flint/internal/clusterctl"
	"github.com/flintkv/flint/internal/protocol"
	"github.com/flintkv/flint/internal/shardmap"
	"github.com/flintkv/flint/internal/slot"
)

// TestLateStepOfDeposedDriver replays, at the data groups, the steps a
// manager that lost its lead of the meta group could still have in
// flight, once its successor (which leads in a later term) has completed
// one move and given up another: each carries the deposed leader's term
// (FLINT.SLOTS FENCE), and each group refuses it (0), so that the keys
// stay where the map gives their slots, with their values, and the
// owner serves writes to them. Unfenced, the LEAVE after the move given
// up would leave its source refusing writes to the slot for good.
func TestLateStepOfDeposedDriver(t *testing.T) {
	c := newSimCluster(t, 2, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ctl, err := clusterctl.Dial(clusterctl.Config{Addrs: c.managers()})
	if err != nil {
		t.Fatal(err)
	}
	awaitMap(t, ctx, ctl)
	cl, err := client.New(c.managers()[0], client.WithSeeds(c.managers()[1:]...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	keys := map[string][]byte{"{done}a": []byte("1"), "{done}b": []byte("2"), "{given}a": []byte("3"), "{given}b": []byte("4")}
	for k, v := range keys {
		if err := cl.Set(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}

	// The deposed leader: the meta group's first, crashed and restarted.
	meta := c.group(0)
	lead := awaitLeader(t, meta)
	st, err := lead.rep.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old := strconv.FormatUint(st.Term, 10)
	meta.stop(lead, true)
	if err := meta.restart(lead); err != nil {
		t.Fatal(err)
	}

	// A move the successor completes, and one it gives up.
	m := finalMap(t, ctx, ctl, 0)
	done, given := slot.Of([]byte("{done}")), slot.Of([]byte("{given}"))
	doneFrom, givenFrom := m.Owner(done).ID, m.Owner(given).ID
	if err := ctl.MoveSlots(ctx, done, done, 3-doneFrom); err != nil {
		t.Fatal(err)
	}
	m = finalMap(t, ctx, ctl, 0)
	r := shardmap.Range{First: given, Last: given}
	next, err := m.WithMoves([]shardmap.Move{{Slots: r, From: givenFrom, To: 3 - givenFrom, Abort: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	recordMap(t, ctx, c, next)
	m = finalMap(t, ctx, ctl, next.Epoch)

	span := func(s int) []string { return []string{strconv.Itoa(s), strconv.Itoa(s)} }
	g := func(id uint64) string { return strconv.FormatUint(id, 10) }
	for _, late := range []struct {
		group uint64
		args  []string
	}{
		{doneFrom, append(append([]string{"LEAVE"}, span(done)...), g(3-doneFrom))},
		{3 - doneFrom, append(append([]string{"DROP"}, span(done)...), g(doneFrom), "0")},
		{3 - doneFrom, append(append([]string{"IMPORT"}, span(done)...), g(doneFrom), "{done}a", "stale", "0")},
		{givenFrom, append(append([]string{"LEAVE"}, span(given)...), g(3-givenFrom))},
		{3 - givenFrom, append(append([]string{"IMPORT"}, span(given)...), g(givenFrom), "{given}a", "stale", "0")},
		{3 - givenFrom, append(append([]string{"OPEN"}, span(given)...), g(givenFrom))},
	} {
		v, err := stepAt(ctx, c.group(late.group), append([]string{"FENCE", old}, late.args...)...)
		if err != nil || v.Int != 0 {
			t.Fatalf("late %v of term %s at group %d: %v (%v), want 0: refused", late.args, old, late.group, v, err)
		}
	}

	for k, v := range keys {
		owner := m.Owner(slot.Of([]byte(k))).ID
		if want := map[string]uint64{"{done}": 3 - doneFrom, "{given}": givenFrom}[k[:len(k)-1]]; owner != want {
			t.Fatalf("the map gives %s to group %d, want %d", k, owner, want)
		}
		if got, err := cl.Get(ctx, k); err != nil || string(got) != string(v) {
			t.Fatalf("GET %s = %q (%v), want %q", k, got, err, v)
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := cl.Set(wctx, k, []byte("new"))
		cancel()
		if err != nil {
			t.Fatalf("SET %s at group %d, after the late steps: %v", k, owner, err)
		}
	}
}

// awaitLeader returns the member of g that leads, once one does.
func awaitLeader(t *testing.T, g *simGroup) *simMember {
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if lead := g.leader(); lead != nil {
			return lead
		}
	}
	t.Fatalf("no member of group %d leads after 20 s", g.id)
	return nil
}

// recordMap makes next the managers' map through FLINT.MAPSET at one that
// takes it.
func recordMap(t *testing.T, ctx context.Context, c *simCluster, next *shardmap.Map) {
	for try := 0; try < 500; try++ {
		for _, addr := range c.managers() {
			if v, err := ask.One(ctx, addr, "", "FLINT.MAPSET", string(next.Encode())); err == nil && v.Int == 1 {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no manager took the map of epoch %d", next.Epoch)
}

// stepAt sends FLINT.SLOTS args to the member of g that serves it (its
// leader), trying each in turn for up to 20 s.
func stepAt(ctx context.Context, g *simGroup, args ...string) (v protocol.Value, err error) {
	full := append([]string{"FLINT.SLOTS"}, args...)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, addr := range g.addrs() {
			if v, err = ask.One(ctx, addr, "", full...); err == nil {
				return v, nil
			}
		}
	}
	return v, fmt.Errorf("no member of group %d took FLINT.SLOTS %v: %w", g.id, args, err)
}

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
