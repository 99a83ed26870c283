package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/flintkv/flint/internal/node"
)

// hostFlags are serve's flags for a node that hosts members of several
// data groups of a sharded cluster on one log and one raft host.
type hostFlags struct {
	nodes, groups, join, clusterID string
}

func (f *hostFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.nodes, "host-nodes", "", "the nodes of a cluster whose nodes host several data groups each, the same list on\neach: id=peerhost:peerport,...; with --id, --host-groups and --managers")
	fs.StringVar(&f.groups, "host-groups", "", "the data groups the --host-nodes host, the same list on each: group:id=host:port,...;...\n(each member's node id and client address); this node serves its members of them")
	fs.StringVar(&f.join, "join-groups", "", "the groups of --host-groups this node joins as a new member, on every start: group,...;\n"+
		"a new node, joining all its groups, gives --cluster-id, or as --host-nodes the cluster's first\nnodes and itself; its --host-groups lists, for a group it joins, the first members and itself;\n"+
		"it runs each with its other members as the group's first ones, and the leader adds it\n"+
		"with FLINT.MEMBER ADD id client-host:port@peerhost:peerport (flint cluster add-node)")
	fs.StringVar(&f.clusterID, "cluster-id", "", "the cluster's id (16 hex digits, which every hosting node logs at start), in place of\n"+
		"the one --host-nodes names: for a new node, whose --host-nodes may then name any nodes")
}

// on reports whether the node hosts groups.
func (f *hostFlags) on() bool { return f.nodes != "" || f.groups != "" }

// config returns the hosting node's nodes, groups and managers, from its
// flags and the cluster and shard flags it shares with a member.
func (f *hostFlags) config(cf *clusterFlags, sf *shardFlags, password string) (*node.ClusterConfig, []node.HostedGroup, *node.ShardConfig, error) {
	switch {
	case f.nodes == "" || f.groups == "":
		return nil, nil, nil, errors.New("--host-nodes and --host-groups go together")
	case cf.members != "" || cf.join != "" || sf.group != 0 || sf.manager:
		return nil, nil, nil, errors.New("a node hosting groups takes --host-nodes and --host-groups, not --initial-members, --join, --shard-group or --manager")
	case sf.managers == "":
		return nil, nil, nil, errors.New("--host-groups needs --managers")
	case cf.tick <= 0 || cf.electionTicks < 2:
		return nil, nil, nil, errors.New("--raft-tick must be positive and --election-ticks at least 2")
	}
	nodes, err := parseHostNodes(f.nodes)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--host-nodes: %v", err)
	}
	groups, err := parseHostGroups(f.groups, nodes)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--host-groups: %v", err)
	}
	if err := markJoins(groups, f.join, cf.id); err != nil {
		return nil, nil, nil, fmt.Errorf("--join-groups: %v", err)
	}
	secret := cf.secret
	if secret == "" {
		secret = os.Getenv("FLINT_CLUSTER_SECRET")
	}
	if secret == "" {
		return nil, nil, nil, errors.New("hosting nodes need --cluster-secret (or $FLINT_CLUSTER_SECRET), the same on every node")
	}
	c := &node.ClusterConfig{ID: cf.id, Members: nodes, PeerListen: cf.peerListen, Secret: []byte(secret), Name: cf.name,
		TickInterval: cf.tick, ElectionTicks: cf.electionTicks}
	if f.clusterID != "" {
		id, err := strconv.ParseUint(f.clusterID, 16, 64)
		if err != nil || id == 0 || len(f.clusterID) != 16 {
			return nil, nil, nil, fmt.Errorf("--cluster-id %q: want the cluster's id, 16 hex digits, not all 0", f.clusterID)
		}
		c.ClusterID = id
	}
	if joinsAll(groups, cf.id) {
		// A node that joins every group it hosts is a new node, not one
		// of the cluster's first nodes, whose list names the cluster (its
		// transport's cluster id), as a replica started with --join is
		// not one of --initial-members. A first node that joins another
		// group stays one of them.
		i := slices.IndexFunc(nodes, func(m node.Member) bool { return m.ID == cf.id })
		c.Join, c.Members = &nodes[i], slices.Delete(slices.Clone(nodes), i, i+1)
	}
	shard := &node.ShardConfig{Managers: splitList(sf.managers), Password: password, Poll: sf.poll}
	return c, groups, shard, nil
}

// parseHostNodes parses "id=peerhost:peerport,...".
func parseHostNodes(s string) ([]node.Member, error) {
	var ms []node.Member
	seen := map[uint64]bool{}
	for _, part := range splitList(s) {
		id, peer, ok := strings.Cut(part, "=")
		n, err := strconv.ParseUint(id, 10, 64)
		if !ok || err != nil || n == 0 || n >= 1<<31 || seen[n] {
			return nil, fmt.Errorf("bad node %q: want id=host:port with a unique id from 1 to 2^31-1", part)
		}
		if _, _, err := net.SplitHostPort(peer); err != nil {
			return nil, fmt.Errorf("bad peer address in %q: %v", part, err)
		}
		seen[n] = true
		ms = append(ms, node.Member{ID: n, Peer: peer})
	}
	if len(ms) == 0 {
		return nil, errors.New("no nodes")
	}
	return ms, nil
}

// parseHostGroups parses "group:id=host:port,...;...", each member's id
// one of nodes'.
func parseHostGroups(s string, nodes []node.Member) ([]node.HostedGroup, error) {
	known := map[uint64]bool{}
	for _, n := range nodes {
		known[n.ID] = true
	}
	var gs []node.HostedGroup
	seen := map[uint64]bool{}
	for _, part := range strings.Split(s, ";") {
		gid, members, ok := strings.Cut(strings.TrimSpace(part), ":")
		g, err := strconv.ParseUint(gid, 10, 64)
		if !ok || err != nil || g == 0 || seen[g] {
			return nil, fmt.Errorf("bad group %q: want group:id=host:port,... with a unique group id from 1", part)
		}
		seen[g] = true
		hg := node.HostedGroup{ID: g, Members: map[uint64]string{}}
		for _, m := range splitList(members) {
			id, addr, ok := strings.Cut(m, "=")
			n, err := strconv.ParseUint(id, 10, 64)
			if !ok || err != nil || !known[n] || hg.Members[n] != "" {
				return nil, fmt.Errorf("bad member %q of group %d: want id=host:port, the id one of --host-nodes' and once per group", m, g)
			}
			if _, _, err := net.SplitHostPort(addr); err != nil {
				return nil, fmt.Errorf("bad client address in %q: %v", m, err)
			}
			hg.Members[n] = addr
		}
		if len(hg.Members) == 0 {
			return nil, fmt.Errorf("group %d has no members", g)
		}
		gs = append(gs, hg)
	}
	return gs, nil
}

// markJoins marks the groups listed in join ("group,...") as ones node
// self joins: each must be one of groups with self a member, and others.
func markJoins(groups []node.HostedGroup, join string, self uint64) error {
	for _, s := range splitList(join) {
		g, err := strconv.ParseUint(s, 10, 64)
		i := slices.IndexFunc(groups, func(hg node.HostedGroup) bool { return hg.ID == g })
		switch {
		case err != nil || i < 0:
			return fmt.Errorf("%q is not a group of --host-groups", s)
		case groups[i].Members[self] == "" || len(groups[i].Members) < 2:
			return fmt.Errorf("group %d: this node (--id %d) joins a group it is listed in, with others", g, self)
		}
		groups[i].Join = true
	}
	return nil
}

// joinsAll reports whether node self joins every group of groups it is a
// member of, and hosts some.
func joinsAll(groups []node.HostedGroup, self uint64) bool {
	hosts := false
	for _, g := range groups {
		if _, ok := g.Members[self]; ok {
			if !g.Join {
				return false
			}
			hosts = true
		}
	}
	return hosts
}
