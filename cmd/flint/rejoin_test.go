package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestWipedMemberRejoins wipes a follower's data directory and starts it
// again under its old id, as an operator might by mistake: while its
// leader remembers what it acknowledged, the member stops at the leader's
// first heartbeat; once no member remembers (the other two restarted), it
// stops as soon as it learns that the group knows its id by another
// directory, and the group marks it lost (flint cluster status). Either
// way it logs what to do, and the group goes on. A joining member may not
// take an initial member's id, and the group refuses to add the used id;
// the node then joins as a new member, at its old addresses, and holds
// every write. Wiped too, and started with --join under its id, that new
// member is stopped the same way.
func TestWipedMemberRejoins(t *testing.T) {
	g := startGroup(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cc := clusterClient(g.addrs)
	defer cc.Close()
	keys := 0
	set := func(n int) {
		t.Helper()
		for range n {
			if err := cc.Set(ctx, fmt.Sprint("k", keys), "v", 0).Err(); err != nil {
				t.Fatalf("SET k%d: %v", keys, err)
			}
			keys++
		}
	}
	set(50)
	w := (g.leader(ctx) + 1) % 3
	wipe := func(i int) {
		g.kill(i)
		if err := os.RemoveAll(g.dirs[i]); err != nil {
			t.Fatal(err)
		}
	}
	const told = "A member id is never reused: start this node on an empty directory with a new --id and --join"

	wipe(w)
	g.launch(w)
	g.awaitExit(w, "counts it as holding the log up to index", told)

	wipe(w)
	for i := range 3 {
		if i != w {
			g.kill(i)
			g.start(i)
		}
	}
	g.leader(ctx)
	set(20)
	g.launch(w)
	g.awaitExit(w, "the group knows member", told)
	set(20)
	all := strings.Join(g.addrs, ",")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		rows, out := clusterStatus(t, all)
		if rows[uint64(w+1)].role == "lost" {
			t.Logf("flint cluster status:\n%s", out)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("flint cluster status does not show member %d as lost:\n%s", w+1, out)
		}
	}

	join := fmt.Sprintf("%s@%s", g.addrs[w], g.peers[w])
	out, code := runFlint(t, flintBin, nil, "serve", "--id", fmt.Sprint(w+1), "--initial-members", g.members,
		"--join", join, "--cluster-secret", "test-secret", "--dir", g.dirs[w])
	if code != 2 || !strings.Contains(out, "--join needs a new --id") {
		t.Fatalf("flint serve --join with an initial member's id: exit %d\n%s", code, out)
	}
	if out, code := runFlint(t, flintBin, nil, "cluster", "add", "--addr", all, fmt.Sprint(w+1), join); code != 1 ||
		!strings.Contains(out, "a new member takes a new id") {
		t.Fatalf("flint cluster add of the lost member's id: exit %d\n%s", code, out)
	}
	if out, code := runFlint(t, flintBin, nil, "cluster", "remove", "--addr", all, fmt.Sprint(w+1)); code != 0 {
		t.Fatalf("flint cluster remove: exit %d\n%s", code, out)
	}
	os.RemoveAll(g.dirs[w])
	n := g.joinAt(g.addrs[w], g.peers[w])
	if out, code := runFlint(t, flintBin, nil, "cluster", "add", "--addr", all, fmt.Sprint(n+1), g.joinAddr(n)); code != 0 {
		t.Fatalf("flint cluster add %d: exit %d\n%s", n+1, code, out)
	}
	var ids []uint64
	for i := range g.addrs {
		if i != w {
			ids = append(ids, uint64(i+1))
		}
	}
	awaitStatus(t, all, 0, ids...)
	set(10)
	readAll(t, g.addrs[n], keys, "v")

	wipe(n)
	g.launch(n)
	g.awaitExit(n, told)
}
