package check

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Config is one `flint check` run.
type Config struct {
	// Addr is the server to check. With Spawn it is ignored: the checker
	// starts its own server on a free port.
	Addr string
	// Spawn starts `Binary serve` on a fresh data directory, which the
	// nemesis may kill, restart and pause.
	Spawn bool
	// Nodes, with Spawn, starts a replicated group of that many members
	// instead of one server: each a `Binary serve` process, their peer
	// traffic through relays of the checker's, so that the nemesis can
	// partition them too. 0: one server, not replicated.
	Nodes int
	// Groups, with Spawn, starts a sharded cluster instead: that many data
	// groups, each of Nodes members (a replicated group, as above) or,
	// with Nodes 0, one data node that is not replicated, and managers
	// whose first map splits the slots evenly among them. The clients
	// route each key to its group. 0: not sharded.
	Groups int
	// Managers, with Groups, is how many managers keep the map: a meta
	// group of that many `flint serve --manager --initial-members`
	// processes, each logging the map on its disk (1, 3 or 5; 0: 1). The
	// clients know every manager's address.
	Managers int
	// Hosted, with Groups, hosts the data groups on Nodes processes
	// instead, nodes as `flint cluster up --hosted` starts them: each
	// node a `flint serve --host-nodes --host-groups` process that hosts
	// its members of the groups on one log, every group RF members on RF
	// nodes, and one relay per node for all the groups' peer traffic. The
	// faults strike nodes, so all a node's members at once; see hosted.go.
	Hosted bool
	// RF, with Hosted, is the members of each group (odd, at most Nodes;
	// 0: min(3, Nodes)).
	RF int
	// Readers, with Nodes, adds that many clients that read the workload's
	// keys (GET) from one member each, round the members, with READONLY:
	// follower reads, which must be linearizable too, and which keep
	// reading where they are when the leader moves. The members they read
	// from are the group's first; one removed later fails their reads.
	Readers int
	// Sessions makes the clients write in sessions (client.WithSessions),
	// so that a write whose outcome they did not learn is sent again and
	// must take effect once.
	Sessions bool
	// Binary is the flint binary to spawn (default: the running one).
	Binary string
	// ServeArgs are more flags for the spawned server.
	ServeArgs []string
	// ServerEnv is added to this process's environment for the spawned
	// server (which inherits it all, so FLINT_BUGS set for `flint check`
	// reaches the server).
	ServerEnv []string

	// Clients run at once, each one operation at a time.
	Clients int
	// Keys is the number of keys each client owns or, with Conflict, the
	// number of keys all clients share. Each group of up to 8 keys also has
	// a counter key for INCR.
	Keys     int
	Conflict bool
	// Duration bounds the workload; Ops bounds the number of operations
	// recorded (0: no bound). The run stops at whichever comes first.
	Duration time.Duration
	Ops      int
	// Mix weighs the commands the clients draw.
	Mix Mix
	// OpTimeout bounds each operation; one that times out has an unknown
	// outcome. It must be shorter than the longest pause for pauses to
	// leave unknown outcomes.
	OpTimeout time.Duration

	// Nemesis lists the faults to inject (needs Spawn); every Interval on
	// average one of them strikes.
	Nemesis         []Fault
	NemesisInterval time.Duration

	// Seed drives the workload and the nemesis; 0 picks one.
	Seed uint64
	// CheckTimeout bounds the linearizability search; a part of the history
	// whose search does not finish in time is UNKNOWN.
	CheckTimeout time.Duration
	// Out is the directory for history.json, the server's log and, on
	// failure, visualizations (default: none is written).
	Out string
	// Command is the command line, recorded in the history.
	Command string
	// Stdout gets the summary; Log gets progress (both may be nil).
	Stdout, Log io.Writer
}

// Defaults for Config's zero fields.
const (
	DefaultClients         = 5
	DefaultKeys            = 5
	DefaultDuration        = 10 * time.Second
	DefaultOpTimeout       = time.Second
	DefaultNemesisInterval = 2 * time.Second
	DefaultCheckTimeout    = 5 * time.Minute
	DefaultMix             = "get=25,set=15,swap=12,cas=10,del=8,incr=8,mset=6,mget=6,range=10,multi=8,expire=4,persist=3,ttl=5"
	// SeedsMix is the fuzzer mix of the reports Flint started from
	// (their MadKV-style test harness): 20% put, 20% swap, 30% get, 20% scan, 10% delete.
	SeedsMix = "set=20,swap=20,get=30,range=20,del=10"
)

// MaxGroups is the most data groups of a sharded run (Config.Groups):
// each is one to nine processes on this machine.
const MaxGroups = 16

// MaxHostedNodes and MaxHostedGroups bound a hosted run (Config.Hosted):
// each node is a process of this machine, each member a client port.
const (
	MaxHostedNodes  = 9
	MaxHostedGroups = 256
)

// Fault is a kind of fault the nemesis injects.
type Fault string

// The faults. With Nodes, each strikes one member or the group's links;
// with Groups, one group chosen at random for each fault. See nemesis for
// the details.
const (
	// FaultKill is kill -9 and a restart on the same data directory (a
	// member of a group stays down a while).
	FaultKill Fault = "kill"
	// FaultPause is SIGSTOP, then SIGCONT after up to twice OpTimeout.
	FaultPause Fault = "pause"
	// FaultKillLeader is FaultKill of the group's leader.
	FaultKillLeader Fault = "kill-leader"
	// FaultPartition cuts the links between members: halves, the leader
	// alone, a bridge, or one way; then heals them.
	FaultPartition Fault = "partition"
	// FaultMembership removes a member and adds a new one, in either
	// order; on hosted nodes, a new node joins a group and one of the
	// group's nodes leaves it (hostchange.go).
	FaultMembership Fault = "membership"
	// FaultWipe kills a member and deletes its data; it rejoins as a new
	// member (on hosted nodes, a new node joins its groups in its place).
	FaultWipe Fault = "wipe"
	// FaultMoveSlots moves a random range of slots (1 to 256) to the group
	// it strikes, online (flint cluster move-slots), in a sharded cluster.
	FaultMoveSlots Fault = "move-slots"
	// FaultSplit starts a new data group and moves half of the struck
	// group's slots to it, online (flint cluster add-group), in a sharded
	// cluster of fewer than MaxGroups groups; with MaxGroups, it is a
	// move-slots.
	FaultSplit Fault = "split"
	// FaultKillManager is kill -9 of the managers' leader (with one
	// manager, of the manager), in a sharded cluster; it restarts after
	// a while. With move-slots or split, it also strikes in the middle
	// of half their moves.
	FaultKillManager Fault = "kill-manager"
)

// faults are every fault, in the order the usage lists them.
var faults = []Fault{FaultKill, FaultPause, FaultKillLeader, FaultPartition, FaultMembership, FaultWipe, FaultMoveSlots, FaultSplit, FaultKillManager}

// groupOnly reports whether f needs a replicated group of at least three.
func (f Fault) groupOnly() bool {
	return f != FaultKill && f != FaultPause && !f.shardedOnly()
}

// shardedOnly reports whether f moves slots between the groups of a
// sharded cluster or strikes its managers, and so needs one.
func (f Fault) shardedOnly() bool {
	return f == FaultMoveSlots || f == FaultSplit || f == FaultKillManager
}

// ParseNemesis parses a comma-separated list of faults; "none" or "" is
// none.
func ParseNemesis(s string) ([]Fault, error) {
	var fs []Fault
	for name := range strings.SplitSeq(s, ",") {
		f := Fault(strings.TrimSpace(name))
		switch {
		case f == "" || f == "none":
		case slices.Contains(faults, f):
			fs = append(fs, f)
		default:
			return nil, fmt.Errorf("%w: unknown fault %q (want none, %s)", ErrConfig, name, faultNames())
		}
	}
	return fs, nil
}

// faultNames lists the faults, comma-separated.
func faultNames() string {
	names := make([]string, len(faults))
	for i, f := range faults {
		names[i] = string(f)
	}
	return strings.Join(names, ", ")
}

// Mix gives each command a weight: the clients draw commands in proportion.
type Mix [numMixKinds]int

// ParseMix parses "get=30,set=20,...". Commands not named weigh 0;
// "seeds" is SeedsMix.
func ParseMix(s string) (Mix, error) {
	if s == "seeds" {
		s = SeedsMix
	}
	var m Mix
	total := 0
	for part := range strings.SplitSeq(s, ",") {
		name, w, ok := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.Atoi(w)
		k := kindNamed(name)
		if !ok || err != nil || n < 0 || k >= numMixKinds {
			return Mix{}, fmt.Errorf("%w: bad mix entry %q (want command=weight, commands %s)", ErrConfig, part, strings.Join(kindNames[:numMixKinds], ","))
		}
		m[k] = n
		total += n
	}
	if total == 0 {
		return Mix{}, fmt.Errorf("%w: mix %q weighs nothing", ErrConfig, s)
	}
	return m, nil
}

func (m Mix) String() string {
	var parts []string
	for k, w := range m {
		if w > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", kind(k), w))
		}
	}
	return strings.Join(parts, ",")
}

// kindNamed returns the kind named name, in any case, or numKinds.
func kindNamed(name string) kind {
	for k, n := range kindNames {
		if strings.EqualFold(name, n) {
			return kind(k)
		}
	}
	return numKinds
}

// withDefaults fills zero fields and checks the configuration.
func (c Config) withDefaults() (Config, error) {
	if c.Clients == 0 {
		c.Clients = DefaultClients
	}
	if c.Keys == 0 {
		c.Keys = DefaultKeys
	}
	if c.Duration == 0 && c.Ops == 0 {
		c.Duration = DefaultDuration
	}
	if c.Mix == (Mix{}) {
		c.Mix, _ = ParseMix(DefaultMix)
	}
	if c.OpTimeout == 0 {
		c.OpTimeout = DefaultOpTimeout
	}
	if c.NemesisInterval == 0 {
		c.NemesisInterval = DefaultNemesisInterval
	}
	if c.Managers == 0 && c.Groups > 0 {
		c.Managers = 1
	}
	c = c.withOutputDefaults()
	switch {
	case c.Managers != 0 && c.Groups == 0:
		return c, fmt.Errorf("%w: --managers keep a sharded cluster's map: add --groups", ErrConfig)
	case c.Managers != 0 && c.Managers != 1 && c.Managers != 3 && c.Managers != 5:
		return c, fmt.Errorf("%w: --managers must be 1, 3 or 5: the members of the meta group, a majority of which keeps the map", ErrConfig)
	case c.Clients < 1 || c.Keys < 1 || c.Ops < 0 || c.Duration < 0 || c.OpTimeout < 0:
		return c, fmt.Errorf("%w: clients and keys must be positive; ops, duration and timeouts not negative", ErrConfig)
	case c.Hosted || c.RF != 0:
		return c.withHostedDefaults()
	case !c.Spawn && c.Addr == "":
		return c, fmt.Errorf("%w: give --addr of a server, or --spawn to start one", ErrConfig)
	case !c.Spawn && len(c.Nemesis) > 0:
		return c, fmt.Errorf("%w: faults are injected only into a server the checker starts: add --spawn", ErrConfig)
	case c.Nodes < 0 || c.Nodes > 9 || c.Nodes%2 == 0 && c.Nodes != 0:
		return c, fmt.Errorf("%w: --nodes must be 1, 3, 5, 7 or 9 (or 0 for one server, not replicated)", ErrConfig)
	case c.Readers < 0 || c.Readers > 0 && c.Nodes == 0:
		return c, fmt.Errorf("%w: --readers read from the members of a group: add --nodes", ErrConfig)
	case c.Nodes > 0 && !c.Spawn:
		return c, fmt.Errorf("%w: --nodes starts a group: add --spawn", ErrConfig)
	case c.Nodes < 3 && slices.ContainsFunc(c.Nemesis, Fault.groupOnly) && c.Groups > 0:
		return c, fmt.Errorf("%w: faults %v need replicated groups: --nodes 3 or more, the members of each group", ErrConfig, c.Nemesis)
	case c.Nodes < 3 && slices.ContainsFunc(c.Nemesis, Fault.groupOnly):
		return c, fmt.Errorf("%w: faults %v need a replicated group: --nodes 3 or more", ErrConfig, c.Nemesis)
	case c.Groups < 0 || c.Groups > MaxGroups:
		return c, fmt.Errorf("%w: --groups must be 1 to %d (or 0 for a cluster that is not sharded)", ErrConfig, MaxGroups)
	case c.Groups > 0 && !c.Spawn:
		return c, fmt.Errorf("%w: --groups starts a sharded cluster: add --spawn", ErrConfig)
	case c.Groups < 2 && slices.Contains(c.Nemesis, FaultMoveSlots):
		return c, fmt.Errorf("%w: fault move-slots moves slots between the groups of a sharded cluster: --groups 2 or more", ErrConfig)
	case c.Groups < 1 && slices.Contains(c.Nemesis, FaultSplit):
		return c, fmt.Errorf("%w: fault split adds a group to a sharded cluster: add --groups", ErrConfig)
	case c.Groups < 1 && slices.Contains(c.Nemesis, FaultKillManager):
		return c, fmt.Errorf("%w: fault kill-manager kills a sharded cluster's manager: add --groups", ErrConfig)
	case c.Groups > 0 && c.Readers > 0:
		return c, fmt.Errorf("%w: --readers read from one member each, which in a sharded cluster serves a part of the keys only: not yet with --groups", ErrConfig)
	}
	return c, nil
}

// withHostedDefaults fills RF and checks the configuration of a hosted
// run.
func (c Config) withHostedDefaults() (Config, error) {
	if c.RF == 0 {
		c.RF = min(3, c.Nodes)
	}
	switch {
	case !c.Hosted:
		return c, fmt.Errorf("%w: --rf is the members of each hosted group: add --hosted", ErrConfig)
	case !c.Spawn:
		return c, fmt.Errorf("%w: --hosted starts nodes that host groups: add --spawn", ErrConfig)
	case c.Groups < 1 || c.Groups > MaxHostedGroups:
		return c, fmt.Errorf("%w: --hosted needs --groups, 1 to %d: the data groups the nodes host", ErrConfig, MaxHostedGroups)
	case c.Nodes < 1 || c.Nodes > MaxHostedNodes:
		return c, fmt.Errorf("%w: --hosted needs --nodes, 1 to %d: the processes that host the groups", ErrConfig, MaxHostedNodes)
	case c.RF < 1 || c.RF%2 == 0:
		return c, fmt.Errorf("%w: --rf must be odd (1, 3, 5, ...), got %d", ErrConfig, c.RF)
	case c.RF > c.Nodes:
		return c, fmt.Errorf("%w: --rf %d needs --nodes %d or more: each member of a group is on a node of its own, got --nodes %d", ErrConfig, c.RF, c.RF, c.Nodes)
	case c.Groups+c.RF-1 < c.Nodes: // group g's members are on nodes g to g+RF-1 (see hosted.go)
		return c, fmt.Errorf("%w: --groups %d of --rf %d members leave nodes with none to host: --nodes at most %d", ErrConfig, c.Groups, c.RF, c.Groups+c.RF-1)
	case c.RF < 3 && slices.ContainsFunc(c.Nemesis, Fault.groupOnly):
		return c, fmt.Errorf("%w: faults %v need replicated groups: --rf 3 or more (and --nodes as many)", ErrConfig, c.Nemesis)
	case c.Groups < 2 && slices.Contains(c.Nemesis, FaultMoveSlots):
		return c, fmt.Errorf("%w: fault move-slots moves slots between the groups of a sharded cluster: --groups 2 or more", ErrConfig)
	case c.Readers > 0:
		return c, fmt.Errorf("%w: --readers read from one member each, which in a sharded cluster serves a part of the keys only: not yet with --groups", ErrConfig)
	}
	return c, nil
}

// withOutputDefaults fills the zero fields that checking and reporting
// use.
func (c Config) withOutputDefaults() Config {
	if c.CheckTimeout == 0 {
		c.CheckTimeout = DefaultCheckTimeout
	}
	if c.Stdout == nil {
		c.Stdout = io.Discard
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	return c
}
