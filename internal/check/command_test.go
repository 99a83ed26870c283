package check

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/flintkv/flint/internal/shardmap"
	"github.com/flintkv/flint/internal/slot"
)

func TestParseCommand(t *testing.T) {
	for _, tc := range []struct {
		cmd  string
		want string // kind keys vals options, or an error
	}{
		{"GET a", "get [a] []"},
		{"set a v nx GET", "set [a] [v] nx get"},
		{"SET a v XX", "set [a] [v] xx"},
		{"SWAP a v", "swap [a] [v]"},
		{"CAS a x y", "cas [a] [x y]"},
		{"DEL a b", "del [a b] []"},
		{"INCR n", "incr [n] []"},
		{"MSET a 1 b 2", "mset [a b] [1 2]"},
		{"MGET a b", "mget [a b] []"},
		{"RANGE a c", "range [a c] []"},
		{"RANGE a c LIMIT 3", "range [a c] [] limit 3"},
		{"PUT a v", "put [a] [v]"},
		{"DELETE a", "delete [a] []"},
		{"MULTI SET a v GET b get a INCR n DEL b EXEC", "multi [a b n] []"},
		{"EXPIRE a 1000000", "expire [a] []"},
		{"expire a 86400", "expire [a] []"},
		{"PERSIST a", "persist [a] []"},
		{"TTL a", "ttl [a] []"},
		{"EXPIRE a 10", "error"},
		{"EXPIRE a 1000001", "error"},
		{"EXPIRE a x", "error"},
		{"EXPIRE a", "error"},
		{"TTL a b", "error"},
		{"MULTI EXEC", "error"},
		{"MULTI GET a", "error"},
		{"MULTI SET a EXEC", "error"},
		{"MULTI SET a v NX EXEC", "error"},
		{"MULTI MSET a v EXEC", "error"},
		{"MULTI MULTI GET a EXEC EXEC", "error"},
		{"", "error"},
		{"GET", "error"},
		{"GET a b", "error"},
		{"SET a v NX XX", "error"},
		{"SET a v EX 10", "error"},
		{"CAS a x", "error"},
		{"MSET a", "error"},
		{"RANGE a c LIMIT 0", "error"},
		{"APPEND a b", "error"},
		{"PUT a", "error"},
		{"PUT a v GET", "error"},
		{"DELETE a b", "error"},
	} {
		c, err := parseCommand(strings.Fields(tc.cmd))
		got := "error"
		if err == nil {
			got = describeCommand(c)
		} else if !errors.Is(err, ErrHistory) {
			t.Errorf("%q: error %v is not ErrHistory", tc.cmd, err)
		}
		if got != tc.want {
			t.Errorf("%q: got %s, want %s", tc.cmd, got, tc.want)
		}
	}
}

func describeCommand(c command) string {
	s := c.kind.String() + " [" + strings.Join(c.keys, " ") + "] [" + strings.Join(c.vals, " ") + "]"
	for _, o := range []struct {
		on   bool
		name string
	}{{c.nx, "nx"}, {c.xx, "xx"}, {c.get, "get"}, {c.limit > 0, "limit " + strconv.Itoa(c.limit)}} {
		if o.on {
			s += " " + o.name
		}
	}
	return s
}

func TestParseMixAndNemesis(t *testing.T) {
	m, err := ParseMix("get=3,SET=1")
	if err != nil || m[kindGet] != 3 || m[kindSet] != 1 || m[kindDel] != 0 {
		t.Errorf("ParseMix: %v, %v", m, err)
	}
	if m, err := ParseMix("seeds"); err != nil || m.String() != "get=30,set=20,swap=20,del=10,range=20" {
		t.Errorf("ParseMix(seeds): %v, %v", m, err)
	}
	// put and delete are the line client's, which the workload does not draw.
	for _, bad := range []string{"", "get", "get=-1", "get=0", "put=3", "delete=1", "get=x"} {
		if _, err := ParseMix(bad); !errors.Is(err, ErrConfig) {
			t.Errorf("ParseMix(%q): %v, want ErrConfig", bad, err)
		}
	}
	if f, err := ParseNemesis("kill, pause"); err != nil || len(f) != 2 || f[0] != FaultKill || f[1] != FaultPause {
		t.Errorf("ParseNemesis: %v, %v", f, err)
	}
	if f, err := ParseNemesis("none"); err != nil || len(f) != 0 {
		t.Errorf("ParseNemesis(none): %v, %v", f, err)
	}
	if _, err := ParseNemesis("split-brain"); !errors.Is(err, ErrConfig) {
		t.Errorf("ParseNemesis(split-brain): %v, want ErrConfig", err)
	}
	// Faults of a group need one; a group needs an odd size and --spawn.
	part, _ := ParseNemesis("partition,kill-leader")
	for _, bad := range []Config{
		{Spawn: true, Nemesis: part},
		{Spawn: true, Nodes: 1, Nemesis: part},
		{Spawn: true, Nodes: 4},
		{Spawn: true, Nodes: 11},
		{Addr: "127.0.0.1:1", Nodes: 3},
		// A sharded cluster: 1 to 16 groups, started by the checker, with
		// group faults only in replicated groups, and no readers yet.
		{Addr: "127.0.0.1:1", Groups: 3},
		{Spawn: true, Groups: -1},
		{Spawn: true, Groups: 17},
		{Spawn: true, Groups: 3, Nemesis: part},
		{Spawn: true, Groups: 3, Nodes: 1, Nemesis: part},
		{Spawn: true, Groups: 3, Nodes: 2},
		{Spawn: true, Groups: 3, Nodes: 3, Readers: 1},
		{Spawn: true, Groups: 1, Nemesis: []Fault{FaultMoveSlots}},
	} {
		if _, err := bad.withDefaults(); !errors.Is(err, ErrConfig) {
			t.Errorf("config %+v: %v, want ErrConfig", bad, err)
		}
	}
	kill, _ := ParseNemesis("kill,pause")
	for _, good := range []Config{
		{Spawn: true, Nodes: 3, Nemesis: part},
		{Spawn: true, Groups: 1},
		{Spawn: true, Groups: 3, Nemesis: kill},
		{Spawn: true, Groups: 16, Nodes: 1, Nemesis: kill},
		{Spawn: true, Groups: 3, Nodes: 3, Nemesis: part},
		{Spawn: true, Groups: 2, Nemesis: []Fault{FaultMoveSlots}},
	} {
		if _, err := good.withDefaults(); err != nil {
			t.Errorf("config %+v: %v", good, err)
		}
	}
}

// TestHostedConfig: a hosted run needs --spawn, --groups and --nodes at
// least --rf, an odd --rf, a node for every member, and replicated groups
// for the faults that need them (every fault otherwise); each refusal
// names what to change.
func TestHostedConfig(t *testing.T) {
	part, _ := ParseNemesis("kill,pause,kill-leader,partition,move-slots")
	for _, bad := range []struct {
		cfg  Config
		want string
	}{
		{Config{Hosted: true, Addr: "127.0.0.1:1", Nodes: 3, Groups: 3}, "add --spawn"},
		{Config{Spawn: true, RF: 3, Nodes: 3, Groups: 3}, "add --hosted"},
		{Config{Spawn: true, Hosted: true, Nodes: 3}, "--hosted needs --groups"},
		{Config{Spawn: true, Hosted: true, Groups: 3}, "--hosted needs --nodes"},
		{Config{Spawn: true, Hosted: true, Nodes: 10, Groups: 3}, "--hosted needs --nodes"},
		{Config{Spawn: true, Hosted: true, Nodes: 2, RF: 3, Groups: 3}, "--rf 3 needs --nodes 3 or more"},
		{Config{Spawn: true, Hosted: true, Nodes: 4, RF: 2, Groups: 3}, "--rf must be odd"},
		{Config{Spawn: true, Hosted: true, Nodes: 5, Groups: 2}, "--nodes at most 4"},
		{Config{Spawn: true, Hosted: true, Nodes: 1, Groups: 3, Nemesis: []Fault{FaultSplit, FaultMembership}}, "need replicated groups: --rf 3"},
		{Config{Spawn: true, Hosted: true, Nodes: 1, Groups: 3, Nemesis: []Fault{FaultPartition}}, "need replicated groups: --rf 3"},
		{Config{Spawn: true, Hosted: true, Nodes: 3, Groups: 1, Nemesis: []Fault{FaultMoveSlots}}, "--groups 2 or more"},
		{Config{Spawn: true, Hosted: true, Nodes: 3, Groups: 3, Readers: 1}, "--readers"},
	} {
		if _, err := bad.cfg.withDefaults(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("config %+v: %v, want ErrConfig saying %q", bad.cfg, err, bad.want)
		}
	}
	for _, good := range []Config{
		{Spawn: true, Hosted: true, Nodes: 3, Groups: 3, Nemesis: part},
		{Spawn: true, Hosted: true, Nodes: 4, Groups: 2, Nemesis: part},
		{Spawn: true, Hosted: true, Nodes: 5, RF: 5, Groups: 64},
		{Spawn: true, Hosted: true, Nodes: 1, Groups: 2, Nemesis: []Fault{FaultKill, FaultMoveSlots, FaultSplit}},
		{Spawn: true, Hosted: true, Nodes: 3, Groups: 3, Nemesis: faults},
	} {
		c, err := good.withDefaults()
		if err != nil || c.RF != min(3, good.Nodes) && good.RF == 0 {
			t.Errorf("config %+v: rf %d, %v", good, c.RF, err)
		}
	}
}

// TestManagersConfig: a sharded run has one manager unless told
// otherwise, and 1, 3 or 5 of them; an unsharded run has none, and
// kill-manager needs a sharded one. Each refusal names what to change.
func TestManagersConfig(t *testing.T) {
	for _, bad := range []struct {
		cfg  Config
		want string
	}{
		{Config{Spawn: true, Groups: 3, Managers: 2}, "--managers must be 1, 3 or 5"},
		{Config{Spawn: true, Groups: 3, Managers: 7}, "--managers must be 1, 3 or 5"},
		{Config{Spawn: true, Groups: 3, Managers: -1}, "--managers must be 1, 3 or 5"},
		{Config{Spawn: true, Hosted: true, Nodes: 3, Groups: 3, Managers: 4}, "--managers must be 1, 3 or 5"},
		{Config{Spawn: true, Managers: 3}, "add --groups"},
		{Config{Spawn: true, Nodes: 3, Managers: 1}, "add --groups"},
		{Config{Spawn: true, Nodes: 3, Nemesis: []Fault{FaultKillManager}}, "kill-manager kills a sharded cluster's manager: add --groups"},
	} {
		if _, err := bad.cfg.withDefaults(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("config %+v: %v, want ErrConfig saying %q", bad.cfg, err, bad.want)
		}
	}
	for _, good := range []struct {
		cfg  Config
		want int
	}{
		{Config{Spawn: true}, 0},
		{Config{Spawn: true, Groups: 1, Nemesis: []Fault{FaultKillManager}}, 1},
		{Config{Spawn: true, Groups: 3, Managers: 3, Nemesis: []Fault{FaultKillManager, FaultMoveSlots, FaultSplit}}, 3},
		{Config{Spawn: true, Groups: 3, Nodes: 3, Managers: 5}, 5},
		{Config{Spawn: true, Hosted: true, Nodes: 3, Groups: 3, Nemesis: []Fault{FaultKillManager}}, 1},
	} {
		c, err := good.cfg.withDefaults()
		if err != nil || c.Managers != good.want {
			t.Errorf("config %+v: %d managers, %v; want %d", good.cfg, c.Managers, err, good.want)
		}
	}
}

func TestLayout(t *testing.T) {
	l := newLayout("p/", 2, 10, false, 0)
	keys := l.universe()
	if len(l.groups[0]) != 2 || len(l.groups[0][0].keys) != 5 || len(keys) != 2*(10+2) {
		t.Fatalf("10 keys per client: groups %v, %d keys", l.groups[0], len(keys))
	}
	shared := newLayout("p/", 3, 5, true, 0)
	if len(shared.universe()) != 6 || &shared.groups[0][0] != &shared.groups[2][0] {
		t.Errorf("conflict mode: %v", shared.universe())
	}
	for _, tc := range []struct {
		clients, keys int
		conflict      bool
		shards        int
		groups        int // each client's
	}{
		{2, 10, false, 0, 2},
		{3, 5, true, 0, 1},
		{5, 5, false, 3, 3},
		{5, 5, true, 3, 3},
		{1, 20, true, 3, 3},
		{2, 2, false, 3, 2},
		{1, 40, false, 16, 16},
	} {
		l := newLayout("t1/", tc.clients, tc.keys, tc.conflict, tc.shards)
		name := fmt.Sprintf("%d clients, %d keys, conflict %v, %d shards", tc.clients, tc.keys, tc.conflict, tc.shards)
		if len(l.groups[0]) != tc.groups {
			t.Errorf("%s: %d groups, want %d", name, len(l.groups[0]), tc.groups)
		}
		checkRanges(t, name, l)
		if tc.shards > 0 {
			checkShards(t, name, l, tc.shards)
		}
	}
}

// checkRanges checks that every RANGE bound of a group of l holds its keys
// and nothing else.
func checkRanges(t *testing.T, name string, l layout) {
	t.Helper()
	keys := l.universe()
	for _, gs := range l.groups {
		for _, g := range gs {
			var in []string
			for _, k := range keys {
				if g.lo <= k && k <= g.hi {
					in = append(in, k)
				}
			}
			if strings.Join(in, " ") != strings.Join(g.keys, " ") {
				t.Errorf("%s: group %v: [%s, %s] holds %v", name, g.keys, g.lo, g.hi, in)
			}
		}
	}
}

// checkShards checks, of a sharded run's layout l, that each group's keys
// and counter share one slot, which the manager's even split of the slots
// among shards groups gives to the group's data group; and that every data
// group gets keys if there are enough of them.
func checkShards(t *testing.T, name string, l layout, shards int) {
	t.Helper()
	var members [][]shardmap.Member
	for range shards {
		members = append(members, []shardmap.Member{{ID: 1, Addr: "127.0.0.1:1"}})
	}
	m, err := shardmap.Even(members)
	if err != nil {
		t.Fatal(err)
	}
	used := map[int]bool{}
	for _, gs := range l.groups {
		for _, g := range gs {
			s := slot.Of([]byte(g.counter))
			for _, k := range g.keys {
				if slot.Of([]byte(k)) != s {
					t.Errorf("%s: %s is in slot %d, its counter %s in %d", name, k, slot.Of([]byte(k)), g.counter, s)
				}
			}
			if owner := m.Owner(s).ID; owner != uint64(g.shard+1) {
				t.Errorf("%s: group %v is in slot %d of data group %d, want %d", name, g.keys, s, owner, g.shard+1)
			}
			used[g.shard] = true
		}
	}
	if len(used) != shards && len(l.universe()) >= 2*shards {
		t.Errorf("%s: keys in data groups %v of %d", name, used, shards)
	}
}
