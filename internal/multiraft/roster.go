package multiraft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/snap"
)

// A group's roster is what its log says of its members besides raft's
// configuration: the info each member was added with (AddMember's, which
// the change's entry carries: see encodeChange), and the node ids removed
// from the group, which are never members again. Every member learns it
// as it applies the changes, or from a snapshot, whose section
// rosterSection holds it (see the package doc, "Files"), so that a node
// that joins, or restarts, knows it as the others do.

// ErrRemovedID refuses to add a node under an id that was removed from
// the group.
var ErrRemovedID = errors.New("multiraft: that node id was removed from the group, and a removed id is never added back " +
	"(raft would take the new node for the old member, its vote included): give the node a new id")

// roster is a group's roster. One, once made, is never changed: a change
// makes another.
type roster struct {
	info    map[uint64][]byte // by member; only those added with info
	removed []uint64          // ascending
}

// emptyRoster is a group's roster before any change.
var emptyRoster = &roster{info: map[uint64][]byte{}}

// isRemoved reports whether node was removed from the group.
func (r *roster) isRemoved(node uint64) bool {
	_, ok := slices.BinarySearch(r.removed, node)
	return ok
}

// apply returns the roster after the change cc, whose added members were
// given info (nil for none), and calls learned for each member whose info
// it records.
func (r *roster) apply(cc raftpb.ConfChangeV2, info []byte, learned func(node uint64, info []byte)) *roster {
	next := &roster{info: maps.Clone(r.info), removed: r.removed}
	for _, c := range cc.Changes {
		switch c.Type {
		case raftpb.ConfChangeAddNode, raftpb.ConfChangeAddLearnerNode:
			if len(info) > 0 {
				next.info[c.NodeID] = info
				learned(c.NodeID, info)
			}
		case raftpb.ConfChangeRemoveNode:
			delete(next.info, c.NodeID)
			if i, ok := slices.BinarySearch(next.removed, c.NodeID); !ok {
				next.removed = slices.Insert(slices.Clone(next.removed), i, c.NodeID)
			}
		}
	}
	return next
}

// rosterSection names the snapshot section that holds a group's roster.
const rosterSection = "multiraft.roster"

// rosterVersion is the version of the section's format, its first byte.
const rosterVersion = 1

// sections returns the snapshot sections of r: none for an empty roster.
func (r *roster) sections() []snap.Section {
	if len(r.info) == 0 && len(r.removed) == 0 {
		return nil
	}
	b := []byte{rosterVersion}
	b = binary.AppendUvarint(b, uint64(len(r.info)))
	for _, node := range slices.Sorted(maps.Keys(r.info)) {
		b = binary.AppendUvarint(b, node)
		b = binary.AppendUvarint(b, uint64(len(r.info[node])))
		b = append(b, r.info[node]...)
	}
	b = binary.AppendUvarint(b, uint64(len(r.removed)))
	for _, node := range r.removed {
		b = binary.AppendUvarint(b, node)
	}
	return []snap.Section{{Name: rosterSection, Data: b}}
}

// rosterOf decodes the roster of a snapshot's sections: empty if they
// have none (a snapshot of a group with no change, or written before
// rosters were).
func rosterOf(ss []snap.Section) (*roster, error) {
	i := slices.IndexFunc(ss, func(s snap.Section) bool { return s.Name == rosterSection })
	if i < 0 {
		return emptyRoster, nil
	}
	d := ss[i].Data
	if len(d) == 0 || d[0] != rosterVersion {
		return nil, fmt.Errorf("multiraft: the snapshot's %s section is of an unknown version", rosterSection)
	}
	d, ok := d[1:], true
	next := func() uint64 {
		v, n := binary.Uvarint(d)
		if n <= 0 {
			ok = false
			return 0
		}
		d = d[n:]
		return v
	}
	r := &roster{info: map[uint64][]byte{}}
	for n := next(); ok && n > 0; n-- {
		node, size := next(), next()
		if ok = ok && size <= uint64(len(d)); ok {
			r.info[node], d = slices.Clone(d[:size]), d[size:]
		}
	}
	for n := next(); ok && n > 0; n-- {
		r.removed = append(r.removed, next())
	}
	if !ok || len(d) != 0 || !slices.IsSorted(r.removed) {
		return nil, fmt.Errorf("multiraft: the snapshot's %s section is damaged", rosterSection)
	}
	return r, nil
}

// MemberInfo returns the info that each member of group id was added
// with (AddMember's), by node id, as this node last applied: members
// added without info, and the group's first members, are not in it. The
// map is the caller's to read, never to change. It is nil if the group
// is not on this node.
func (h *Host) MemberInfo(id uint64) map[uint64][]byte {
	if g := h.group(id); g != nil {
		return g.roster.Load().info
	}
	return nil
}

// setRoster makes r group g's roster, as of a snapshot restored or
// installed, and tells Config.OnMember each member's info.
func (h *Host) setRoster(g *group, r *roster) {
	g.roster.Store(r)
	for _, node := range slices.Sorted(maps.Keys(r.info)) {
		h.learned(g.id, node, r.info[node])
	}
}

// learned tells Config.OnMember, if set, a member's info.
func (h *Host) learned(group, node uint64, info []byte) {
	if h.cfg.OnMember != nil {
		h.cfg.OnMember(group, node, info)
	}
}
