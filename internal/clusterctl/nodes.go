package clusterctl

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/flintkv/flint/internal/ask"
	"github.com/flintkv/flint/internal/shardmap"
)

// A node of a sharded cluster is a process that runs one member of one
// data group (flint serve --shard-group). AddNode and RemoveNode change a
// group's members in its raft configuration (FLINT.MEMBER, as Add and
// Remove do) and in the managers' map (FLINT.MAPSET, at the next epoch),
// which is what CLUSTER SLOTS and NODES show, and what the managers poll
// for each group's leader. g's addresses are the managers'.

// AddNode adds member id of data group group, running already at addrs
// (client-host:port@peerport: flint serve --shard-group group --join
// addrs), to the group, as Add does, then to the map. Called again after
// a failure, it resumes: a member that votes already is not added again.
func (g *Group) AddNode(ctx context.Context, group, id uint64, addrs string) error {
	sh, err := g.shardStatusWait(ctx)
	if err != nil {
		return err
	}
	gr := sh.Map.Group(group)
	if gr == nil {
		return fmt.Errorf("clusterctl: no group %d in the map", group)
	}
	client, _, _ := strings.Cut(addrs, "@")
	if m, ok := gr.Member(id); ok {
		if m.Addr != client {
			return fmt.Errorf("clusterctl: group %d has a member %d already, at %s", group, id, m.Addr)
		}
		return nil
	}
	members := g.groupOf(gr)
	if votes, _ := members.members(ctx); !votes[id] {
		if err := members.Add(ctx, id, addrs); err != nil {
			return fmt.Errorf("adding member %d to group %d: %w", id, group, err)
		}
	}
	return g.setMembers(ctx, group, func(ms []shardmap.Member) []shardmap.Member {
		if slices.ContainsFunc(ms, func(m shardmap.Member) bool { return m.ID == id }) {
			return nil
		}
		return append(slices.Clone(ms), shardmap.Member{ID: id, Addr: client})
	})
}

// RemoveNode removes a member of a data group, as Remove does (a leader
// hands leadership over first), then from the map. node names it by its
// client address (host:port), or, with group given, by its member id. A
// group's last member is not removed. It returns the member removed and
// the member that leadership moved to (0 if none moved). Called again
// after a failure, it resumes: a member that its group no longer has is
// only taken out of the map.
func (g *Group) RemoveNode(ctx context.Context, group uint64, node string) (key shardmap.MemberKey, movedTo uint64, err error) {
	sh, err := g.shardStatusWait(ctx)
	if err != nil {
		return key, 0, err
	}
	gr, id, err := findNode(sh.Map, group, node)
	if err != nil {
		return key, 0, err
	}
	key = shardmap.MemberKey{Group: gr.ID, Member: id}
	if len(gr.Members) == 1 {
		return key, 0, fmt.Errorf("clusterctl: member %d is the last of group %d: a group's last member cannot be removed", id, gr.ID)
	}
	members := g.groupOf(gr)
	in, err := members.members(ctx)
	if err != nil {
		return key, 0, err
	}
	if _, ok := in[id]; ok {
		if movedTo, err = members.Remove(ctx, id); err != nil {
			return key, movedTo, fmt.Errorf("removing member %d from group %d: %w", id, gr.ID, err)
		}
	}
	return key, movedTo, g.setMembers(ctx, gr.ID, func(ms []shardmap.Member) []shardmap.Member {
		i := slices.IndexFunc(ms, func(m shardmap.Member) bool { return m.ID == id })
		if i < 0 {
			return nil
		}
		return slices.Delete(slices.Clone(ms), i, i+1)
	})
}

// findNode returns the group and id of the member node names: a client
// address, or with group not 0 that group's member id.
func findNode(m *shardmap.Map, group uint64, node string) (*shardmap.Group, uint64, error) {
	if group != 0 {
		gr := m.Group(group)
		if gr == nil {
			return nil, 0, fmt.Errorf("clusterctl: no group %d in the map", group)
		}
		for _, mb := range gr.Members {
			if strconv.FormatUint(mb.ID, 10) == node || mb.Addr == node {
				return gr, mb.ID, nil
			}
		}
		return nil, 0, fmt.Errorf("clusterctl: group %d has no member %s", group, node)
	}
	for i := range m.Groups {
		for _, mb := range m.Groups[i].Members {
			if mb.Addr == node {
				return &m.Groups[i], mb.ID, nil
			}
		}
	}
	return nil, 0, fmt.Errorf("clusterctl: no member at %s in the map (name a member id with its group)", node)
}

// groupOf returns the group gr, reached through its members' addresses.
func (g *Group) groupOf(gr *shardmap.Group) *Group {
	addrs := make([]string, len(gr.Members))
	for i, m := range gr.Members {
		addrs[i] = m.Addr
	}
	return &Group{cfg: Config{Addrs: addrs, Password: g.cfg.Password}}
}

// members returns the group's members as its leader knows them, each with
// whether it votes; it fails if the group has no leader now.
func (g *Group) members(ctx context.Context) (map[uint64]bool, error) {
	_, info, err := g.leaderOrAny(ctx)
	if err != nil {
		return nil, err
	}
	if info["role"] != "master" {
		return nil, errors.New("clusterctl: the group has no leader now: try again")
	}
	out := map[uint64]bool{atoi(info["flint_member"]): true}
	for id, f := range followers(info) {
		out[id] = f["voter"] == "1"
	}
	return out, nil
}

// setMembers changes group's members in the map to what next returns for
// the members it lists now (nil: no change).
func (g *Group) setMembers(ctx context.Context, group uint64, next func([]shardmap.Member) []shardmap.Member) error {
	mv := &mover{g: g, pool: ask.NewPool(g.cfg.Password)}
	defer mv.pool.Close()
	_, err := mv.changeMap(ctx, func(cur *shardmap.Map) (*shardmap.Map, error) {
		gr := cur.Group(group)
		if gr == nil {
			return nil, fmt.Errorf("clusterctl: no group %d in the map", group)
		}
		ms := next(gr.Members)
		if ms == nil {
			return nil, nil
		}
		return cur.WithMembers(group, ms)
	})
	return err
}
