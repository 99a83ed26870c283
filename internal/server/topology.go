package server

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/flintkv/flint/internal/protocol"
	"github.com/flintkv/flint/internal/shardmap"
	"github.com/flintkv/flint/internal/slot"
)

// topology is the cluster as CLUSTER SLOTS, SHARDS, NODES and INFO show
// it: shards (Redis's word for a group), each with its slot ranges and its
// nodes (members), the master (leader) first.
//
// A member of a group that is not sharded shows one shard owning every
// slot, from what it knows of its group (ClusterView); a member of a
// sharded cluster shows every group of the map, with its own group's
// leader as it knows it and the others' as last learned (Shards.Leaders),
// or their first member if none was.
type topology struct {
	shards []shard
	myID   string // this member's node id
	epoch  uint64
	ok     bool // every slot is served: a map is known, covers them all, and each group has a leader known
}

type shard struct {
	slots []shardmap.Range
	nodes []node // the master first
}

type node struct {
	id         string
	addr       string
	master     bool
	voter      bool   // listed by CLUSTER SLOTS, unless down
	offset     uint64 // the replication offset CLUSTER SHARDS shows
	self, lost bool
	down       bool // it did not answer the managers' last poll
}

// nodeID is a member's Redis Cluster node id: 40 hex characters, from its
// group's id and its member id, the same on every member. A group that is
// not sharded has id 0 here.
func nodeID(group, member uint64) string { return fmt.Sprintf("%024x%016x", group, member) }

// topology returns the cluster as the connection's member knows it.
func (c *conn) topology() topology {
	v := c.srv.cluster.ClusterView()
	if c.srv.sharded == nil {
		return groupTopology(v)
	}
	return shardedTopology(c.srv.sharded.Shards(), v)
}

// groupTopology is the topology of the one group v describes. With no
// known leader, this member stands first, as master: a client that sends
// it commands is answered CLUSTERDOWN, which clients retry, until a leader
// is elected (an empty reply instead leaves some clients with no node for
// any slot).
func groupTopology(v ClusterView) topology {
	master := v.Leader
	if _, ok := v.member(master); !ok {
		master = v.Self
	}
	sh := shard{slots: []shardmap.Range{{First: 0, Last: slot.Count - 1}}}
	for _, m := range v.Members {
		offset := m.Match
		if m.ID == v.Self {
			offset = v.Applied
		}
		sh.nodes = append(sh.nodes, node{id: nodeID(0, m.ID), addr: m.Addr, master: m.ID == master, voter: m.Voter,
			offset: offset, self: m.ID == v.Self, lost: m.Lost})
	}
	masterFirst(sh.nodes)
	return topology{shards: []shard{sh}, myID: nodeID(0, v.Self), epoch: 1, ok: v.Leader != 0}
}

// shardedTopology is the topology of the map sh holds, v being what this
// member knows of its own group. Before the map is known it has no shards,
// and the member's node id names its group if sh does.
func shardedTopology(sh *Shards, v ClusterView) topology {
	if sh == nil {
		return topology{myID: nodeID(0, v.Self)}
	}
	if sh.Map == nil {
		return topology{myID: nodeID(sh.Group, v.Self)}
	}
	t := topology{myID: nodeID(sh.Group, v.Self), epoch: sh.Map.Epoch, ok: sh.Map.Covered() == slot.Count}
	for _, g := range sh.Map.Groups {
		if len(g.Slots) == 0 {
			continue
		}
		master := sh.Leaders[g.ID]
		if g.ID == sh.Group && v.Leader != 0 {
			master = v.Leader
		}
		if _, ok := g.Member(master); !ok {
			master, t.ok = g.Members[0].ID, false
		}
		s := shard{slots: g.Slots}
		for _, m := range g.Members {
			self := g.ID == sh.Group && m.ID == v.Self
			offset := uint64(0)
			if self {
				offset = v.Applied
			}
			down := !self && sh.Down[shardmap.MemberKey{Group: g.ID, Member: m.ID}]
			s.nodes = append(s.nodes, node{id: nodeID(g.ID, m.ID), addr: m.Addr, master: m.ID == master, voter: true, offset: offset, self: self, down: down})
		}
		masterFirst(s.nodes)
		t.shards = append(t.shards, s)
	}
	slices.SortFunc(t.shards, func(a, b shard) int { return a.slots[0].First - b.slots[0].First })
	return t
}

// masterFirst moves the master to the front, keeping the others' order.
func masterFirst(nodes []node) {
	if i := slices.IndexFunc(nodes, func(n node) bool { return n.master }); i > 0 {
		m := nodes[i]
		copy(nodes[1:i+1], nodes[:i])
		nodes[0] = m
	}
}

// clusterSlots replies to CLUSTER SLOTS: each slot range of each shard,
// with its master first and the other voters after it but those down (as
// Redis leaves out failing replicas), each as Redis 7 gives a node: ip,
// port, node id and a map of further networking metadata (empty: Flint
// announces no hostnames).
func (c *conn) clusterSlots(t topology) {
	n := 0
	for _, sh := range t.shards {
		n += len(sh.slots)
	}
	c.out = protocol.AppendArray(c.out, n)
	for _, sh := range t.shards {
		var nodes []node
		for _, nd := range sh.nodes {
			if nd.master || nd.voter && !nd.down {
				nodes = append(nodes, nd)
			}
		}
		for _, r := range sh.slots {
			c.out = protocol.AppendArray(c.out, 2+len(nodes))
			c.int(int64(r.First))
			c.int(int64(r.Last))
			for _, nd := range nodes {
				host, port := splitAddr(nd.addr)
				c.out = protocol.AppendArray(c.out, 4)
				c.bulkString(host)
				c.int(int64(port))
				c.bulkString(nd.id)
				c.out = protocol.AppendMap(c.out, 0, c.proto) // no hostname: no more networking metadata
			}
		}
	}
}

// clusterShards replies to CLUSTER SHARDS as Redis 7 does: per shard, its
// slot ranges (flat, start and end) and its nodes (a map of id, port, ip,
// endpoint, role, replication-offset and health; maps are flat arrays in
// RESP2).
func (c *conn) clusterShards(t topology) {
	c.out = protocol.AppendArray(c.out, len(t.shards))
	for _, sh := range t.shards {
		c.out = protocol.AppendMap(c.out, 2, c.proto)
		c.bulkString("slots")
		c.out = protocol.AppendArray(c.out, 2*len(sh.slots))
		for _, r := range sh.slots {
			c.int(int64(r.First))
			c.int(int64(r.Last))
		}
		c.bulkString("nodes")
		c.out = protocol.AppendArray(c.out, len(sh.nodes))
		for _, nd := range sh.nodes {
			host, port := splitAddr(nd.addr)
			role := "replica"
			if nd.master {
				role = "master"
			}
			c.out = protocol.AppendMap(c.out, 7, c.proto)
			c.bulkString("id")
			c.bulkString(nd.id)
			c.bulkString("port")
			c.int(int64(port))
			c.bulkString("ip")
			c.bulkString(host)
			c.bulkString("endpoint")
			c.bulkString(host)
			c.bulkString("role")
			c.bulkString(role)
			c.bulkString("replication-offset")
			c.int(int64(nd.offset))
			c.bulkString("health")
			c.bulkString(map[bool]string{false: "online", true: "failed"}[nd.down])
		}
	}
}

// nodes is CLUSTER NODES's text: one line per member, in Redis's format
// (id, ip:port@cport, flags, master, ping, pong, epoch, link, slots); a
// member down is flagged fail and disconnected.
func (t topology) nodes() string {
	var b strings.Builder
	for _, sh := range t.shards {
		master := sh.nodes[0].id
		for _, nd := range sh.nodes {
			flags, of, slots := "slave", master, ""
			if nd.master {
				flags, of = "master", "-"
				for _, r := range sh.slots {
					slots += fmt.Sprintf(" %d-%d", r.First, r.Last)
				}
			}
			link := "connected"
			switch {
			case nd.self:
				flags = "myself," + flags
			case nd.down:
				flags, link = flags+",fail", "disconnected"
			}
			host, port := splitAddr(nd.addr)
			fmt.Fprintf(&b, "%s %s:%d@%d %s %s 0 0 %d %s%s\n", nd.id, host, port, port+10000, flags, of, t.epoch, link, slots)
		}
	}
	return b.String()
}

// info is CLUSTER INFO's text.
func (t topology) info() string {
	state, assigned, known := "fail", 0, 0
	for _, sh := range t.shards {
		for _, r := range sh.slots {
			assigned += r.Last - r.First + 1
		}
		known += len(sh.nodes)
	}
	ok := assigned
	if t.ok {
		state = "ok"
	} else {
		ok = 0
	}
	return fmt.Sprintf("cluster_state:%s\r\ncluster_slots_assigned:%d\r\ncluster_slots_ok:%d\r\ncluster_slots_pfail:0\r\n"+
		"cluster_slots_fail:%d\r\ncluster_known_nodes:%d\r\ncluster_size:%d\r\ncluster_current_epoch:%d\r\ncluster_my_epoch:%d\r\n",
		state, assigned, ok, assigned-ok, known, len(t.shards), t.epoch, t.epoch)
}

// mapCmd is FLINT.MAP, which a node of a sharded cluster asks another (a
// manager) for the cluster map: a three-element array of the map's
// encoding (shardmap.Map.Encode), a flat array of the leaders known, as
// group id and member id pairs, in order of group, and one of the members
// down, likewise. It is CLUSTERDOWN while the map is unknown here. Given
// the epoch of a map the caller holds (FLINT.MAP epoch), it sends a null
// in the encoding's place if the map here is of that epoch: a data node
// asks every poll, and the map of 1,000 groups is 150 KB.
func (c *conn) mapCmd(args [][]byte) {
	if c.srv.sharded == nil {
		c.err("ERR This instance is not a node of a sharded cluster")
		return
	}
	sh := c.srv.sharded.Shards()
	if sh == nil || sh.Map == nil {
		c.err("CLUSTERDOWN The cluster map is not known here yet")
		return
	}
	groups := slices.Sorted(maps.Keys(sh.Leaders))
	down := slices.SortedFunc(maps.Keys(sh.Down), func(a, b shardmap.MemberKey) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Member, b.Member))
	})
	c.out = protocol.AppendArray(c.out, 3)
	if len(args) == 2 && string(args[1]) == strconv.FormatUint(sh.Map.Epoch, 10) {
		c.null()
	} else {
		c.out = protocol.AppendBulk(c.out, sh.Map.Encode())
	}
	c.out = protocol.AppendArray(c.out, 2*len(groups))
	for _, g := range groups {
		c.int(int64(g))
		c.int(int64(sh.Leaders[g]))
	}
	c.out = protocol.AppendArray(c.out, 2*len(down))
	for _, k := range down {
		c.int(int64(k.Group))
		c.int(int64(k.Member))
	}
}
