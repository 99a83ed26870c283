package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flintkv/flint/internal/proctest"
)

// statusRow is one member's line of `flint cluster status`.
type statusRow struct {
	id                            uint64
	addr, role, voter, match, lag string
}

// clusterStatus runs `flint cluster status --addr addrs` and returns its
// members' lines, by member id, and its output.
func clusterStatus(t *testing.T, addrs string) (map[uint64]statusRow, string) {
	t.Helper()
	out, code := runFlint(t, flintBin, nil, "cluster", "status", "--addr", addrs)
	if code != 0 {
		t.Fatalf("flint cluster status: exit %d:\n%s", code, out)
	}
	rows := map[uint64]statusRow{}
	header := false
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 0 && f[0] == "ID":
			header = true
		case header && len(f) >= 6:
			id, err := strconv.ParseUint(f[0], 10, 64)
			if err != nil {
				t.Fatalf("flint cluster status: bad line %q:\n%s", line, out)
			}
			rows[id] = statusRow{id: id, addr: f[1], role: f[2], voter: f[3], match: f[4], lag: f[5]}
		}
	}
	return rows, out
}

// awaitStatus waits up to 20 s for `flint cluster status --addr addrs` to
// list the members ids, each a voter, with one of them, leader if it is
// not 0, leading and the others following (an election may be running
// when it is first asked). It returns the leader's id.
func awaitStatus(t *testing.T, addrs string, leader uint64, ids ...uint64) uint64 {
	t.Helper()
	var out string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var rows map[uint64]statusRow
		rows, out = clusterStatus(t, addrs)
		if lead, ok := statusIs(rows, leader, ids); ok {
			t.Logf("flint cluster status:\n%s", out)
			return lead
		}
	}
	t.Fatalf("flint cluster status does not list the voters %v with leader %d (0: any) after 20 s:\n%s", ids, leader, out)
	return 0
}

// statusIs reports whether rows are the voters ids, led by leader (any
// one of them if leader is 0), and returns the leader.
func statusIs(rows map[uint64]statusRow, leader uint64, ids []uint64) (uint64, bool) {
	if len(rows) != len(ids) {
		return 0, false
	}
	lead := uint64(0)
	for _, id := range ids {
		r, ok := rows[id]
		if !ok || r.voter != "yes" || (r.role != "leader" && r.role != "follower") {
			return 0, false
		}
		if r.role == "leader" {
			lead = id
		}
	}
	return lead, lead != 0 && (leader == 0 || lead == leader)
}

// TestClusterCommands runs flint cluster status, add, transfer and remove
// against a group of three processes, each command given one member's
// address (not always the leader's): status lists three voters and the
// leader; a fourth member started with --join is added (its address given
// with the peer port alone) and votes, and holds the group's writes; leadership is transferred to it; the old
// leader is removed and stops serving; and the server's refusals (an id
// in use, no such member) exit 1 with its message.
func TestClusterCommands(t *testing.T) {
	g := startGroup(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	lead := g.leader(ctx)
	follower := (lead + 1) % 3
	awaitStatus(t, g.addrs[follower], 0, 1, 2, 3)
	lc := redis.NewClient(&redis.Options{Addr: g.addrs[lead]})
	defer lc.Close()
	if err := lc.Set(ctx, "before", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}

	n := g.join()
	_, peerPort, _ := net.SplitHostPort(g.peers[n])
	join := g.addrs[n] + "@" + peerPort // the peer takes the client's host
	out, code := runFlint(t, flintBin, nil, "cluster", "add", "--addr", g.addrs[follower], "4", join)
	if code != 0 || !strings.Contains(out, "member 4 ("+join+") was added, and votes") {
		t.Fatalf("flint cluster add: exit %d:\n%s", code, out)
	}
	awaitStatus(t, g.addrs[follower], 0, 1, 2, 3, 4)
	c4 := readOnlyClient(t, g.addrs[n])
	if v, err := c4.Get(ctx, "before").Result(); err != nil || v != "1" {
		t.Fatalf("the new member: before = %q (%v)", v, err)
	}

	out, code = runFlint(t, flintBin, nil, "cluster", "transfer", "4", "--addr", g.addrs[follower])
	if code != 0 || !strings.Contains(out, "member 4 leads now") {
		t.Fatalf("flint cluster transfer: exit %d:\n%s", code, out)
	}
	awaitStatus(t, g.addrs[lead], 4, 1, 2, 3, 4)

	out, code = runFlint(t, flintBin, nil, "cluster", "remove", fmt.Sprint(lead+1), "--addr", g.addrs[follower])
	if code != 0 || !strings.Contains(out, fmt.Sprintf("member %d was removed", lead+1)) {
		t.Fatalf("flint cluster remove: exit %d:\n%s", code, out)
	}
	g.awaitRemoved(lead)
	var left []uint64
	for i := range 4 {
		if i != lead {
			left = append(left, uint64(i+1))
		}
	}
	awaitStatus(t, g.addrs[follower], 0, left...)
	if v, err := c4.Get(ctx, "before").Result(); err != nil || v != "1" {
		t.Fatalf("after the changes: before = %q (%v)", v, err)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"add", "2", "127.0.0.1:1@2"}, "a new member takes a new id"},
		{[]string{"add", fmt.Sprint(lead + 1), "127.0.0.1:1@2"}, "a new member takes a new id"}, // removed: retired
		{[]string{"transfer", "99"}, "no current member of the group has that id"},
		{[]string{"remove", "99"}, "no current member of the group has that id"},
	} {
		args := append([]string{"cluster", c.args[0], "--addr", g.addrs[follower]}, c.args[1:]...)
		if out, code := runFlint(t, flintBin, nil, args...); code != 1 || !strings.Contains(out, c.want) {
			t.Errorf("flint %s: exit %d, want 1 and %q:\n%s", strings.Join(args, " "), code, c.want, out)
		}
	}
}

// TestClusterCommandsBadUsage checks that flint cluster exits 2 with a
// usage message for a bad command line, and 1, saying why, against a
// server that is not a member of a replicated group.
func TestClusterCommandsBadUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"frob"},
		{"status", "extra"},
		{"status", "--bogus"},
		{"status", "--addr", "nowhere"},
		{"add", "4"},
		{"add", "x", "127.0.0.1:1@2"},
		{"add", "4", "127.0.0.1:1"}, // no peer port
		{"remove"},
		{"remove", "0"},
		{"remove", "--timeout", "0", "1"},
		{"transfer", "1", "2"},
		{"transfer", "--help"},
	} {
		out, code := runFlint(t, flintBin, nil, append([]string{"cluster"}, args...)...)
		if code != 2 || !strings.Contains(out, "usage: flint cluster") {
			t.Errorf("flint cluster %s: exit %d, want 2 and a usage message:\n%s", strings.Join(args, " "), code, out)
		}
	}
	srv := proctest.Serve(t, flintBin)
	out, code := runFlint(t, flintBin, nil, "cluster", "status", "--addr", srv.Addr)
	if code != 1 || !strings.Contains(out, "not a member of a replicated group") {
		t.Errorf("flint cluster status against a single node: exit %d, want 1:\n%s", code, out)
	}
}
