package check

import (
	"fmt"
	"strings"
)

// A hosted run (Config.Hosted) checks the layout of `flint cluster up
// --hosted`: Config.Nodes processes, nodes, that host the members of
// Config.Groups data groups of Config.RF members each, group g's members
// on nodes g, g+1, ... (mod Nodes, counting from 1), and managers (see
// managers.go) whose first map splits the slots evenly among the groups.
// Node i is
//
//	flint serve --id i --host-nodes 1=<relay 1>,... --peer-listen <its peer port>
//	    --host-groups "1:1=<client>,2=<client>,...;2:..." --managers <every manager>
//
// with the flags of a member of a group (memberFlags), in dir/m<i>. A node
// has one peer port for all the groups it hosts, so one relay stands in
// front of it, and a partition cuts nodes apart: every group they share at
// once. Each member has a client port of its own; the node's server is
// known by its first member's (server.addr), the one it accepts
// connections on once it started.
//
// The nodes are the members of one cluster, whose hosted lists the node
// ids of each group's members: kill, pause and kill-leader strike a node
// (all its members at once; kill-leader the node that leads the most
// groups), partition cuts nodes apart, and move-slots moves slots to a
// group drawn at random. Kills leave every group a majority of its members
// up. Membership, wipe and split strike a group drawn at random, and
// start nodes and groups (see hostchange.go).

// newHosted makes the managers and the nodes of a hosted run in dir (the
// managers' in dir/manager), not yet started.
func newHosted(cfg Config, bin, dir string) (*fleet, error) {
	ms, err := newManagers(cfg, bin, dir)
	if err != nil {
		return nil, err
	}
	f := &fleet{cfg: cfg, bin: bin, dir: dir, managers: ms}
	nodes := &cluster{bin: bin, dir: dir, args: cfg.ServeArgs, env: cfg.ServerEnv}
	if err := nodes.addMembers(cfg.Nodes); err != nil {
		f.stop()
		return nil, err
	}
	f.nodes = nodes
	groups, err := placeMembers(nodes, cfg.Groups, cfg.RF)
	if err != nil {
		f.stop()
		return nil, err
	}
	var hostNodes, servers, hostGroups []string
	for _, m := range nodes.members {
		hostNodes = append(hostNodes, fmt.Sprintf("%d=%s", m.id, m.relay.addr()))
	}
	for g, members := range groups {
		servers = append(servers, members)
		hostGroups = append(hostGroups, fmt.Sprintf("%d:%s", g+1, members))
	}
	for _, m := range nodes.members {
		m.srv.args = append(m.srv.args, "--host-nodes", strings.Join(hostNodes, ","),
			"--host-groups", strings.Join(hostGroups, ";"), "--managers", strings.Join(ms.addrs(), ","))
	}
	ms.makeManagers(servers, cfg.RF)
	return f, nil
}

// placeMembers places groups data groups of rf members on the members of
// nodes, group g's (from 1) on nodes g, g+1, ... (mod the nodes), and
// gives each node a client address for each member it hosts: the first
// its server's own, the others held until it starts. It records each
// group's nodes and first members in nodes (hosted, firsts), and returns
// the latter, as --host-groups lists them: id=client address,...
func placeMembers(nodes *cluster, groups, rf int) ([]string, error) {
	for g := range groups {
		var ids []uint64
		var list []string
		for r := range rf {
			m := nodes.members[(g+r)%len(nodes.members)]
			addr := m.srv.addr
			if m.clients == nil {
				m.clients = map[uint64]string{}
			} else {
				ln, err := holdAddr()
				if err != nil {
					return nil, err
				}
				m.srv.held, addr = append(m.srv.held, ln), ln.Addr().String()
			}
			m.clients[uint64(g+1)] = addr
			ids, list = append(ids, m.id), append(list, fmt.Sprintf("%d=%s", m.id, addr))
		}
		nodes.hosted, nodes.firsts = append(nodes.hosted, ids), append(nodes.firsts, strings.Join(list, ","))
	}
	return nodes.firsts, nil
}

// describeHosted names a hosted fleet for the summary.
func (f *fleet) describeHosted() string {
	var ns []string
	for _, m := range f.nodes.members {
		ns = append(ns, fmt.Sprintf("\n    node %d: %s", m.id, strings.Join(m.addrs(), " ")))
	}
	return fmt.Sprintf("spawned hosted cluster: %s and %d nodes hosting %d data groups of %d members%s",
		f.describeManagers(), len(f.nodes.members), len(f.nodes.hosted), f.cfg.RF, strings.Join(ns, ""))
}
