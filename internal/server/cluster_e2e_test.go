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
	"github.com/flintkv/flint/internal/shardmap"
	"github.com/flintkv/flint/internal/slot"
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

// fakeShard is fakeMember as member 1 of group 2 of a sharded cluster of
// three groups, slots split as redis-cli splits them: 0-5460 group 1 (led
// by its member 2, at 127.0.0.1:7102), 5461-10922 group 2 (this one),
// 10923-16383 group 3 (no leader known: its first member, 127.0.0.1:7301).
type fakeShard struct {
	fakeMember
	view *server.Shards
}

func (f *fakeShard) Shards() *server.Shards { return f.view }

func newFakeShard(t *testing.T) *fakeShard {
	var groups [][]shardmap.Member
	for g := 1; g <= 3; g++ {
		var ms []shardmap.Member
		for m := 1; m <= 3; m++ {
			ms = append(ms, shardmap.Member{ID: uint64(m), Addr: fmt.Sprintf("127.0.0.1:7%d0%d", g, m)})
		}
		groups = append(groups, ms)
	}
	m, err := shardmap.Even(groups)
	if err != nil {
		t.Fatal(err)
	}
	return &fakeShard{view: &server.Shards{Map: m, Group: 2, Leaders: map[uint64]uint64{1: 2}}}
}

// TestShardRouting: a data node of group 2 runs commands on its slots'
// keys, answers MOVED for the others' (to the group's leader, or its first
// member), CROSSSLOT for keys in several slots, routes FLINT.SEQ by the
// write it wraps and does not route RANGE (at a follower, RANGE's MOVED
// names a slot of the group's own); before it has the map, it
// answers CLUSTERDOWN.
func TestShardRouting(t *testing.T) {
	f := newFakeShard(t)
	f.mu.lead = 1
	f.Local = server.Local{S: store.New(store.Options{})}
	c := dialRaw(t, servertest.StartBackend(t, server.Config{}, f).Addr)
	// Keys: "a" is in slot 15495 (group 3), "b" 3300 (group 1), "foo" 12182
	// (group 3), "c" 7365 and "{c}x" 7365 (group 2).
	for _, tc := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"SET", "c", "1"}, `"OK"`},
		{[]string{"GET", "c"}, `"1"`},
		{[]string{"SET", "b", "1"}, "(error) MOVED 3300 127.0.0.1:7102"},
		{[]string{"GET", "a"}, "(error) MOVED 15495 127.0.0.1:7301"},
		{[]string{"MSET", "c", "1", "{c}x", "2"}, `"OK"`},
		{[]string{"MSET", "c", "1", "b", "2"}, "(error) CROSSSLOT Keys in request don't hash to the same slot"},
		{[]string{"MGET", "b", "c"}, "(error) CROSSSLOT Keys in request don't hash to the same slot"},
		{[]string{"MGET", "b", "b"}, "(error) MOVED 3300 127.0.0.1:7102"},
		{[]string{"FLINT.SEQ", "1", "1", "1", "SET", "b", "1"}, "(error) MOVED 3300 127.0.0.1:7102"},
		{[]string{"FLINT.SEQ", "1", "1", "1", "MSET", "c", "1", "b", "2"}, "(error) CROSSSLOT Keys in request don't hash to the same slot"},
		{[]string{"RANGE", "a", "~"}, `["c" "1" "{c}x" "2"]`},
	} {
		if got := c.do(tc.cmd...).String(); got != tc.want {
			t.Errorf("%q = %s, want %s", tc.cmd, got, tc.want)
		}
	}
	// The keys of a slot, of those this group holds; ASKING is known.
	for _, tc := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"CLUSTER", "COUNTKEYSINSLOT", "7365"}, "2"},
		{[]string{"CLUSTER", "COUNTKEYSINSLOT", "3300"}, "0"},
		{[]string{"CLUSTER", "GETKEYSINSLOT", "7365", "10"}, `["c" "{c}x"]`},
		{[]string{"CLUSTER", "GETKEYSINSLOT", "7365", "1"}, `["c"]`},
		{[]string{"CLUSTER", "GETKEYSINSLOT", "7365", "0"}, `[]`},
		{[]string{"CLUSTER", "COUNTKEYSINSLOT", "16384"}, "(error) ERR Invalid slot"},
		{[]string{"CLUSTER", "COUNTKEYSINSLOT", "x"}, "(error) ERR value is not an integer or out of range"},
		{[]string{"CLUSTER", "GETKEYSINSLOT", "1", "-1"}, "(error) ERR Invalid slot or number of keys"},
		{[]string{"CLUSTER", "GETKEYSINSLOT", "1"}, "(error) ERR wrong number of arguments for 'cluster|getkeysinslot' command"},
		{[]string{"ASKING"}, `"OK"`},
		{[]string{"CLUSTER", "FOO"}, "(error) ERR unknown subcommand 'FOO'. Try CLUSTER HELP."},
	} {
		if got := c.do(tc.cmd...).String(); got != tc.want {
			t.Errorf("%q = %s, want %s", tc.cmd, got, tc.want)
		}
	}
	if help := c.do("CLUSTER", "HELP").String(); !strings.Contains(help, "CLUSTER <subcommand>") || !strings.Contains(help, "COUNTKEYSINSLOT <slot>") {
		t.Errorf("CLUSTER HELP = %s", help)
	}
	// At a follower, RANGE is redirected to the leader with a slot of the
	// group's own, not its start key's.
	f.mu.Lock()
	f.mu.lead = 2
	f.mu.Unlock()
	if got := c.do("RANGE", "a", "~").String(); got != "(error) MOVED 5461 127.0.0.1:7002" {
		t.Errorf("RANGE at a follower = %s, want MOVED 5461 to its leader", got)
	}
	f.view = &server.Shards{Group: 2}
	if got := c.do("GET", "c").String(); got != "(error) CLUSTERDOWN The cluster is down" {
		t.Errorf("GET before the map is known = %s", got)
	}
	if got := string(c.do("CLUSTER", "MYID").Str); !strings.HasPrefix(got, "000000000000000000000002") {
		t.Errorf("CLUSTER MYID before the map is known = %s, want group 2's", got)
	}
}

// TestShardTx: in a sharded cluster a transaction's keys must share a
// slot, as in Redis Cluster: a queued command on another group's key gets
// MOVED and discards the transaction, and EXEC of commands on two slots of
// the group answers CROSSSLOT.
func TestShardTx(t *testing.T) {
	f := newFakeShard(t)
	f.mu.lead = 1
	f.Local = server.Local{S: store.New(store.Options{})}
	c := dialRaw(t, servertest.StartBackend(t, server.Config{}, f).Addr)
	other := "" // a key of group 2 in another slot than "c"'s, 7365
	for i := 0; other == ""; i++ {
		if k := fmt.Sprint("k", i); slot.Of([]byte(k)) != 7365 && f.view.Map.Owner(slot.Of([]byte(k))).ID == 2 {
			other = k
		}
	}
	for _, tc := range []struct {
		cmds []string
		want []string
	}{
		{[]string{"MULTI", "SET c 1", "GET {c}x", "EXEC"}, []string{`"OK"`, `"QUEUED"`, `"QUEUED"`, `["OK" (nil)]`}},
		{[]string{"MULTI", "SET c 1", "SET b 1", "EXEC"},
			[]string{`"OK"`, `"QUEUED"`, "(error) MOVED 3300 127.0.0.1:7102", "(error) EXECABORT Transaction discarded because of previous errors."}},
		{[]string{"MULTI", "MSET c 1 b 2", "EXEC"},
			[]string{`"OK"`, "(error) CROSSSLOT Keys in request don't hash to the same slot", "(error) EXECABORT Transaction discarded because of previous errors."}},
		{[]string{"MULTI", "SET c 2", "SET " + other + " 1", "EXEC", "GET c"},
			[]string{`"OK"`, `"QUEUED"`, `"QUEUED"`, "(error) CROSSSLOT Keys in request don't hash to the same slot", `"1"`}},
		{[]string{"WATCH b"}, []string{"(error) MOVED 3300 127.0.0.1:7102"}},
		{[]string{"WATCH c", "MULTI", "FLINT.SEQ 1 1 1 SET b 1", "EXEC"},
			[]string{`"OK"`, `"OK"`, "(error) MOVED 3300 127.0.0.1:7102", "(error) EXECABORT Transaction discarded because of previous errors."}},
	} {
		for i, cmd := range tc.cmds {
			if got := c.do(strings.Fields(cmd)...).String(); got != tc.want[i] {
				t.Errorf("%v: %q = %s, want %s", tc.cmds, cmd, got, tc.want[i])
			}
		}
	}
}

// TestTxRefusedAtFollower: EXEC at a member that turns out not to lead is
// answered MOVED to the leader for the slot of the transaction's keys, as
// a write is.
func TestTxRefusedAtFollower(t *testing.T) {
	c := startMember(t, &fakeMember{refuse: replica.ErrNotLeader, leadAfter: 2})
	for _, step := range [][2]string{
		{"MULTI", `"OK"`}, {"SET foo 1", `"QUEUED"`}, {"EXEC", "(error) MOVED 12182 127.0.0.1:7002"},
	} {
		if got := c.do(strings.Fields(step[0])...).String(); got != step[1] {
			t.Errorf("%s = %s, want %s", step[0], got, step[1])
		}
	}
}
