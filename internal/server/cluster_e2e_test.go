package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/flintkv/flint/internal/replica"
	"github.com/flintkv/flint/internal/server"
	"github.com/flintkv/flint/internal/server/servertest"
	"github.com/flintkv/flint/internal/store"
)

// fakeMember is member 1 of a group of three, 127.0.0.1:7001 to 7003, as
// the server's Cluster sees it. Until a write comes, it knows no leader;
// the write is refused with refuse, and the member then learns that
// leadAfter leads (0: still none): the race of a write that passed the
// redirection and reached the backend of a member that does not lead.
type fakeMember struct {
	server.Local
	refuse    error
	leadAfter uint64
	mu        struct {
		sync.Mutex
		lead uint64
	}
}

func (f *fakeMember) Apply(ctx context.Context, batch []byte, done func(i int, res store.Result)) error {
	if f.refuse == nil {
		return f.Local.Apply(ctx, batch, done)
	}
	f.mu.Lock()
	f.mu.lead = f.leadAfter
	f.mu.Unlock()
	return f.refuse
}

func (f *fakeMember) leader() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.lead
}

func (f *fakeMember) Redirect() (string, bool) {
	if l := f.leader(); l > 1 {
		return fmt.Sprintf("127.0.0.1:700%d", l), true
	}
	return "", false
}

func (f *fakeMember) ClusterView() server.ClusterView {
	v := server.ClusterView{Self: 1, Leader: f.leader()}
	for id := uint64(1); id <= 3; id++ {
		v.Members = append(v.Members, server.ClusterMember{ID: id, Addr: fmt.Sprintf("127.0.0.1:700%d", id), Voter: true})
	}
	return v
}

func startMember(t *testing.T, f *fakeMember) *rawConn {
	t.Helper()
	f.Local = server.Local{S: store.New(store.Options{})}
	return dialRaw(t, servertest.StartBackend(t, server.Config{}, f).Addr)
}

// TestClusterSlotsFormat checks CLUSTER SLOTS byte for byte as Redis 7
// words it: one range, the master first, each node as ip, port, node id
// and a map of further networking metadata, empty without hostnames (an
// empty array in RESP2, an empty map in RESP3). redis-py, go-redis and
// redis-cli read the fourth element or skip it.
func TestClusterSlotsFormat(t *testing.T) {
	f := &fakeMember{}
	f.mu.lead = 2
	c := startMember(t, f)
	node := func(id int, emptyMap string) string {
		return fmt.Sprintf("*4\r\n$9\r\n127.0.0.1\r\n:700%d\r\n$40\r\n%040d\r\n%s", id, id, emptyMap)
	}
	c.send(command("CLUSTER", "SLOTS"))
	c.expectBytes("*1\r\n*5\r\n:0\r\n:16383\r\n" + node(2, "*0\r\n") + node(1, "*0\r\n") + node(3, "*0\r\n"))
	c.do("HELLO", "3")
	c.send(command("CLUSTER", "SLOTS"))
	c.expectBytes("*1\r\n*5\r\n:0\r\n:16383\r\n" + node(2, "%0\r\n") + node(1, "%0\r\n") + node(3, "%0\r\n"))
}

// TestRefusedWriteRedirects sends writes to a member that neither leads
// nor knows who does, so that they reach its backend, which refuses them
// as one that does not lead. Each is answered as Redis Cluster answers a
// write at a replica: MOVED to the leader with the slot of its own key, or
// CLUSTERDOWN while no leader is known (so also at a member removed from
// its group); READONLY only for a write without keys. A refusal of another
// kind keeps its reply.
func TestRefusedWriteRedirects(t *testing.T) {
	notLeader := fmt.Errorf("%w: raft refused the proposal", replica.ErrNotLeader)
	removed := fmt.Errorf("%w: %w", replica.ErrNotLeader, replica.ErrRemoved)
	for _, tc := range []struct {
		name      string
		refuse    error
		leadAfter uint64
		cmds      [][]string
		want      []string // a prefix of each reply, in order
	}{
		{"moved", notLeader, 3, [][]string{{"SET", "a", "1"}, {"INCR", "b"}, {"DEL", "c", "a"}},
			[]string{"MOVED 15495 127.0.0.1:7003", "MOVED 3300 127.0.0.1:7003", "MOVED 7365 127.0.0.1:7003"}},
		{"no leader", notLeader, 0, [][]string{{"SET", "a", "1"}}, []string{"CLUSTERDOWN "}},
		{"removed", removed, 0, [][]string{{"SET", "a", "1"}}, []string{"CLUSTERDOWN "}},
		{"no keys", notLeader, 3, [][]string{{"FLUSHALL"}}, []string{"READONLY "}},
		{"unknown outcome", replica.ErrOutcomeUnknown, 3, [][]string{{"SET", "a", "1"}}, []string{"UNKNOWN replica: the write may or may not"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startMember(t, &fakeMember{refuse: tc.refuse, leadAfter: tc.leadAfter})
			var pipeline string
			for _, cmd := range tc.cmds {
				pipeline += command(cmd...)
			}
			c.send(pipeline) // one batch, refused as a whole
			for i, want := range tc.want {
				if got := c.read().String(); !strings.HasPrefix(got, "(error) "+want) {
					t.Fatalf("reply to %q: %s, want (error) %s...", tc.cmds[i], got, want)
				}
			}
		})
	}
}
