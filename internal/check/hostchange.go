package check

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flintkv/flint/internal/shardmap"
)

// On hosted nodes (hosted.go), membership, wipe and split change which
// nodes run and what they host. The nodes' cluster tracks it: its members
// are the nodes that run (a node wiped is gone), each member's clients
// the groups it hosts a member of now, hosted each group's nodes now, and
// firsts each group's first members (the group's --host-groups entry, or
// the members it was split onto).
//
//   - membership: a new node, with the next id, starts and joins a group
//     drawn at random (serve --join-groups g --cluster-id <the cluster's>,
//     its --host-groups naming the group's first members and itself); it
//     is added to the group (clusterctl.AddNode: FLINT.MEMBER ADD at the
//     group's leader, then the map) and one of the group's other nodes is
//     removed from it (clusterctl.RemoveNode). That node runs on, hosting
//     its other groups (stopped if it hosts none).
//   - wipe: a node is killed and its data directory deleted; a new node
//     joins every group it hosted, and it is removed from each.
//   - split: a new group starts on the nodes of a group drawn at random,
//     each member on a free port of its node (clusterctl.AddHostedGroup:
//     FLINT.GROUP START, then half of that group's slots move to it); a
//     node restarted with the same flags hosts it again (its GROUPS file).
//
// Membership and wipe first restart the nodes that are down, so that
// every group keeps a majority up through the change. At most
// maxHostedJoins nodes join in a run, and at most MaxHostedGroups groups
// exist: past that, membership, wipe and split move slots instead.

// maxHostedJoins bounds the nodes that join a hosted run.
const maxHostedJoins = 2

// hostedMembership is the membership fault on hosted nodes.
func (n *nemesis) hostedMembership(cl *cluster, g uint64) (string, error) {
	old, err := n.nodeToReplace(cl, g)
	switch {
	case err != nil:
		return "membership", err
	case old == nil:
		return n.moveSlots(g)
	}
	m, err := n.fl.replaceNode(old, []uint64{g})
	if err != nil {
		return "membership", err
	}
	return fmt.Sprintf("membership: added node %d, removed node %d", m.id, old.id), nil
}

// nodeToReplace restarts the nodes that are down and returns a node of
// group g drawn at random, or nil once maxHostedJoins nodes joined.
func (n *nemesis) nodeToReplace(cl *cluster, g uint64) (*member, error) {
	if n.fl.joined() >= maxHostedJoins {
		return nil, nil
	}
	if err := n.fl.restartDue(true); err != nil {
		return nil, err
	}
	return n.pick(cl.nodesOf(g)), nil
}

// hostedWipe is the wipe fault on hosted nodes: a node of group g loses
// its disk.
func (n *nemesis) hostedWipe(cl *cluster, g uint64) (string, error) {
	old, err := n.nodeToReplace(cl, g)
	switch {
	case err != nil:
		return "wipe", err
	case old == nil:
		return n.moveSlots(g)
	}
	if _, err := cl.clusterID(); err != nil { // before a wipe takes the directory it reads
		return "wipe", err
	}
	if err := old.srv.kill(); err != nil {
		return "wipe", err
	}
	old.down = time.Now().Add(time.Hour) // gone before it is due
	if err := os.RemoveAll(filepath.Join(filepath.Dir(old.srv.log), "data")); err != nil {
		return "wipe", err
	}
	m, err := n.fl.replaceNode(old, old.groups())
	if err != nil {
		return "wipe", err
	}
	return fmt.Sprintf("wipe node %d, its groups %v joined by node %d", old.id, m.groups(), m.id), nil
}

// hostedSplit is the split fault on hosted nodes: a new group on the
// nodes of group g, which half of g's slots move to.
func (n *nemesis) hostedSplit(cl *cluster, g uint64) (string, error) {
	if len(cl.hosted) >= MaxHostedGroups {
		return n.moveSlots(g)
	}
	if err := n.fl.restartDue(true); err != nil {
		return "split", err
	}
	id := uint64(len(cl.hosted) + 1)
	kind := fmt.Sprintf("split: new group %d", id)
	nodes := cl.nodesOf(g)
	var members []shardmap.Member
	var list []string
	for _, m := range nodes {
		ln, err := holdAddr()
		if err != nil {
			return kind, err
		}
		addr := ln.Addr().String()
		ln.Close() // the node binds it
		members = append(members, shardmap.Member{ID: m.id, Addr: addr})
		list = append(list, fmt.Sprintf("%d=%s", m.id, addr))
	}
	killed, err := n.duringMove(func(ctx context.Context) error { return n.fl.admin().AddHostedGroup(ctx, id, members, g) })
	if kind += killed; err != nil {
		return kind, err
	}
	for i, m := range nodes {
		m.clients[id] = members[i].Addr
	}
	cl.addHosted(nodes, strings.Join(list, ","))
	return kind, nil
}

// joined returns how many nodes joined the hosted run.
func (f *fleet) joined() int { return int(f.nodes.nextID) - 1 - f.cfg.Nodes }

// replaceNode starts a new node that joins groups gs, adds it to each,
// and removes old from each. old is stopped if it hosts no group then;
// if it is down (wiped), it is gone.
func (f *fleet) replaceNode(old *member, gs []uint64) (*member, error) {
	c := f.nodes
	m, err := c.startJoiner(gs, strings.Join(f.managers.addrs(), ","))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	admin := f.admin()
	for _, g := range gs {
		if err := admin.AddNode(ctx, g, m.id, m.clients[g]+"@"+m.relay.addr()); err != nil {
			return m, fmt.Errorf("adding node %d to group %d: %w", m.id, g, err)
		}
		c.hosted[g-1] = append(c.hosted[g-1], m.id)
		if _, _, err := admin.RemoveNode(ctx, g, strconv.FormatUint(old.id, 10)); err != nil {
			return m, fmt.Errorf("removing node %d from group %d: %w", old.id, g, err)
		}
		c.hosted[g-1] = slices.DeleteFunc(c.hosted[g-1], func(id uint64) bool { return id == old.id })
		delete(old.clients, g)
	}
	if len(old.clients) > 0 {
		return m, nil
	}
	if old.down.IsZero() {
		if err := old.srv.stop(); err != nil {
			return m, fmt.Errorf("node %d, which hosts no group now: %w", old.id, err)
		}
	}
	old.relay.close()
	c.members = deleteMember(c.members, old)
	c.gone = append(c.gone, old)
	return m, nil
}

// startJoiner starts a new hosted node, with the next id, that joins
// groups gs, each member on a free port, and learns the map from managers
// (host:port,...); the caller adds it to them.
func (c *cluster) startJoiner(gs []uint64, managers string) (*member, error) {
	cid, err := c.clusterID()
	if err != nil {
		return nil, err
	}
	m, err := c.newMember(c.nextID, "")
	if err != nil {
		return nil, err
	}
	c.nextID++
	m.clients = map[uint64]string{}
	var groups, joins []string
	for i, g := range gs {
		addr := m.srv.addr
		if i > 0 {
			ln, err := holdAddr()
			if err != nil {
				m.relay.close()
				return nil, err
			}
			m.srv.held, addr = append(m.srv.held, ln), ln.Addr().String()
		}
		m.clients[g] = addr
		groups = append(groups, fmt.Sprintf("%d:%s,%d=%s", g, c.firsts[g-1], m.id, addr))
		joins = append(joins, strconv.FormatUint(g, 10))
	}
	var nodes []string
	for _, o := range slices.Concat(c.members, c.gone, []*member{m}) {
		nodes = append(nodes, fmt.Sprintf("%d=%s", o.id, o.relay.addr()))
	}
	m.srv.args = append(m.srv.args, "--host-nodes", strings.Join(nodes, ","), "--host-groups", strings.Join(groups, ";"),
		"--join-groups", strings.Join(joins, ","), "--cluster-id", cid, "--managers", managers)
	if err := m.srv.start(); err != nil {
		m.relay.close()
		return nil, fmt.Errorf("node %d: %w", m.id, err)
	}
	c.members = append(c.members, m)
	return m, nil
}

// clusterID returns the hosted nodes' cluster id, as a node's IDENTITY
// records it (see package node): 16 hex digits. It reads it from the
// first node whose directory holds it, once.
func (c *cluster) clusterID() (string, error) {
	if c.id != "" {
		return c.id, nil
	}
	for _, m := range c.members {
		f, err := os.Open(filepath.Join(filepath.Dir(m.srv.log), "data", "IDENTITY"))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if id, ok := strings.CutPrefix(sc.Text(), "cluster "); ok {
				c.id = id
			}
		}
		f.Close()
		if c.id != "" {
			return c.id, nil
		}
	}
	return "", fmt.Errorf("%w: no node's IDENTITY names the cluster", ErrServer)
}

// nodesOf returns the nodes that host group g.
func (c *cluster) nodesOf(g uint64) []*member {
	var ms []*member
	for _, m := range c.members {
		if _, ok := m.clients[g]; ok {
			ms = append(ms, m)
		}
	}
	return ms
}

// addHosted adds the next group, hosted by nodes, whose first members
// --host-groups would list as first.
func (c *cluster) addHosted(nodes []*member, first string) {
	var ids []uint64
	for _, m := range nodes {
		ids = append(ids, m.id)
	}
	c.hosted, c.firsts = append(c.hosted, ids), append(c.firsts, first)
}

// groups returns the groups m hosts, in order.
func (m *member) groups() []uint64 {
	return slices.Sorted(maps.Keys(m.clients))
}
