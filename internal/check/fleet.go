package check

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/flintkv/flint/internal/clusterctl"
	"github.com/flintkv/flint/internal/protocol"
)

// fleet is every process a checker that spawns runs the workload against:
// one cluster (a server, or a replicated group), or, with Config.Groups,
// the data groups of a sharded cluster and its managers.
//
// A sharded cluster's managers are a meta group of Config.Managers
// members (managers.go), which keep the map in their logs, and the
// nemesis leaves them alone but for kill-manager: the other faults strike
// the data groups, one at a time. A data node is `flint serve
// --shard-group G --managers <every manager>`, with the flags of a member
// of a replicated group (cluster) if Config.Nodes is not 0.
//
// With Config.Hosted, the data groups are hosted by nodes instead (see
// hosted.go), and the managers are as above.
//
// One goroutine at a time drives it, as for cluster.
type fleet struct {
	groups []*cluster // data group g is groups[g-1]; the one cluster if not sharded; none if hosted
	// nodes are the nodes that host the data groups, as the members of one
	// cluster (whose hosted lists each group's nodes); nil if not hosted.
	nodes    *cluster
	managers *cluster // the meta group; nil if not sharded
	// What a sharded fleet makes a new data group with (addGroup): the
	// run's configuration, the flint binary, and the fleet's directory.
	cfg      Config
	bin, dir string
}

// startFleet starts cfg's servers in dir and waits until each accepts
// connections and, in a sharded cluster, until the manager says that
// every group has a leader.
func startFleet(cfg Config, bin, dir string) (*fleet, error) {
	if cfg.Groups == 0 {
		c, err := startCluster(cfg, bin, dir)
		if err != nil {
			return nil, err
		}
		return &fleet{groups: []*cluster{c}}, nil
	}
	newFleet := newSharded
	if cfg.Hosted {
		newFleet = newHosted
	}
	f, err := newFleet(cfg, bin, dir)
	if err != nil {
		return nil, err
	}
	if err := f.start(); err != nil {
		f.stop()
		return nil, err
	}
	return f, nil
}

// newSharded makes the managers and the data groups of a sharded cluster
// in dir (the managers' in dir/manager, group g's members in dir/g<g>),
// not yet started.
func newSharded(cfg Config, bin, dir string) (*fleet, error) {
	f := &fleet{cfg: cfg, bin: bin, dir: dir}
	var err error
	if f.managers, err = newManagers(cfg, bin, dir); err != nil {
		return nil, err
	}
	var servers []string
	for g := 1; g <= cfg.Groups; g++ {
		c, err := newGroup(cfg, bin, filepath.Join(dir, fmt.Sprintf("g%d", g)), uint64(g), f.shardFlags(uint64(g)))
		if err != nil {
			f.stop()
			return nil, err
		}
		f.groups = append(f.groups, c)
		servers = append(servers, c.addrs()...)
	}
	f.managers.makeManagers(servers, max(cfg.Nodes, 1))
	return f, nil
}

// shardFlags returns the flags of a member of data group g.
func (f *fleet) shardFlags(g uint64) []string {
	return []string{"--shard-group", strconv.FormatUint(g, 10), "--managers", strings.Join(f.managers.addrs(), ",")}
}

// addGroup starts a new data group of a sharded fleet, numbered after the
// last, as newSharded makes them. The managers' map does not have it until
// it is added to it (clusterctl's AddGroup): until then it serves nothing.
func (f *fleet) addGroup() (*cluster, error) {
	g := len(f.groups) + 1
	c, err := newGroup(f.cfg, f.bin, filepath.Join(f.dir, fmt.Sprintf("g%d", g)), uint64(g), f.shardFlags(uint64(g)))
	if err != nil {
		return nil, err
	}
	if err := c.start(); err != nil {
		c.stop()
		return nil, fmt.Errorf("group %d: %w", g, err)
	}
	f.groups = append(f.groups, c)
	return c, nil
}

// readyTimeout bounds the wait for a new sharded cluster to serve.
const readyTimeout = 30 * time.Second

// start starts the managers, then the data groups (or the nodes that host
// them), and waits until a manager's CLUSTER INFO says "ok": every group
// has a leader that answers.
func (f *fleet) start() error {
	if err := f.managers.start(); err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	for _, c := range f.clusters() {
		if err := c.start(); err != nil {
			return f.inGroup(c, err)
		}
	}
	deadline := time.Now().Add(readyTimeout)
	for {
		var info string
		var err error
		for _, addr := range f.managers.addrs() {
			if info, err = clusterInfo(addr); err == nil && strings.Contains(info, "cluster_state:ok") {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: no manager's CLUSTER INFO said cluster_state:ok within %v: %q %v", ErrServer, readyTimeout, info, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// clusterInfo asks the node at addr for CLUSTER INFO over a connection of
// its own.
func clusterInfo(addr string) (string, error) {
	v, err := askOne(addr, 300*time.Millisecond, "CLUSTER", "INFO")
	if err != nil || v.Kind != protocol.KindBulk {
		return "", fmt.Errorf("CLUSTER INFO: %v %v", v, err)
	}
	return string(v.Str), nil
}

// admin returns a sharded fleet's managers, to change the map through.
func (f *fleet) admin() *clusterctl.Group {
	g, _ := clusterctl.Dial(clusterctl.Config{Addrs: f.managers.addrs()}) // fails on no address only
	return g
}

// sharded reports whether the fleet is a sharded cluster.
func (f *fleet) sharded() bool { return f.managers != nil }

// clusters returns the clusters whose members the nemesis strikes: the
// data groups, or the one cluster of hosted nodes.
func (f *fleet) clusters() []*cluster {
	if f.nodes != nil {
		return []*cluster{f.nodes}
	}
	return f.groups
}

// addrs returns the client addresses the workload's clients know: the
// managers' first, if sharded, then every member's, group by group (node
// by node if hosted).
func (f *fleet) addrs() []string {
	var as []string
	if f.managers != nil {
		as = append(as, f.managers.addrs()...)
	}
	for _, c := range f.clusters() {
		as = append(as, c.addrs()...)
	}
	return as
}

// replicated reports whether the groups are replicated groups.
func (f *fleet) replicated() bool { return f.clusters()[0].replicated() }

// exited returns an error if a server exited without being killed.
func (f *fleet) exited() error {
	if f.managers != nil {
		if err := f.managers.exited(); err != nil {
			return fmt.Errorf("manager: %w", err)
		}
	}
	for _, c := range f.clusters() {
		if err := c.exited(); err != nil {
			return f.inGroup(c, err)
		}
	}
	return nil
}

// restartDue restarts the killed members whose time has come, in every
// group and of the managers; with all, every killed member.
func (f *fleet) restartDue(all bool) error {
	if f.managers != nil {
		if err := f.managers.restartDue(all); err != nil {
			return fmt.Errorf("manager: %w", err)
		}
	}
	for _, c := range f.clusters() {
		if err := c.restartDue(all); err != nil {
			return f.inGroup(c, err)
		}
	}
	return nil
}

// down returns how many members are down, in all groups and of the
// managers.
func (f *fleet) down() int {
	n := 0
	if f.managers != nil {
		n += len(f.managers.members) - len(f.managers.running())
	}
	for _, c := range f.clusters() {
		n += len(c.members) - len(c.running())
	}
	return n
}

// inGroup adds c's group to err, in a sharded cluster that is not
// hosted.
func (f *fleet) inGroup(c *cluster, err error) error {
	if c.group == 0 {
		return err
	}
	return fmt.Errorf("group %d: %w", c.group, err)
}

// stop stops the data groups (see cluster.stop), then the managers.
func (f *fleet) stop() error {
	var errs []error
	for _, c := range f.clusters() {
		if err := c.stop(); err != nil {
			errs = append(errs, f.inGroup(c, err))
		}
	}
	if f.managers != nil {
		if err := f.managers.stop(); err != nil {
			errs = append(errs, fmt.Errorf("manager: %w", err))
		}
	}
	return errors.Join(errs...)
}

// describe names the fleet for the summary.
func (f *fleet) describe() string {
	switch {
	case !f.sharded():
		return f.groups[0].describe()
	case f.nodes != nil:
		return f.describeHosted()
	}
	size := "a data node, not replicated"
	if f.replicated() {
		size = fmt.Sprintf("a replicated group of %d", len(f.groups[0].members))
	}
	var gs []string
	for _, c := range f.groups {
		gs = append(gs, fmt.Sprintf("\n    group %d: %s", c.group, strings.Join(c.addrs(), " ")))
	}
	return fmt.Sprintf("spawned sharded cluster: %s and %d data groups, each %s%s", f.describeManagers(), len(f.groups), size, strings.Join(gs, ""))
}
