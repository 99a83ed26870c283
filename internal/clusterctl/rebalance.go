package clusterctl

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/flintkv/flint/internal/ask"
	"github.com/flintkv/flint/internal/shardmap"
)

// splitMay reads the map, with shardStatusWait, and returns it if a split
// that adds group id with members, taking slots from group from (0: the
// group with the most), may go on; else why not: it is done (ErrSplitDone,
// see splitDone), the map lists a move to another group (see refuseMoves),
// or it has group id with other members.
func (g *Group) splitMay(ctx context.Context, id uint64, members []shardmap.Member, from uint64) (Shards, error) {
	sh, err := g.shardStatusWait(ctx)
	if err != nil {
		return sh, err
	}
	if err := splitDone(sh.Map, id, members, from); err != nil {
		return sh, err
	}
	if err := refuseMoves(sh.Map, func(o shardmap.Move) bool { return o.To == id && !o.Abort }); err != nil {
		return sh, err
	}
	if old := sh.Map.Group(id); old != nil && !slices.Equal(old.Members, members) {
		return sh, fmt.Errorf("clusterctl: group %d is in the map already, with other members", id)
	}
	return sh, nil
}

// AddGroup adds data group id, whose members are already running (`flint
// serve --shard-group id --managers ...`), to the map with no slots, then
// moves to it the upper half of the slots of group from (0: the group
// with the most), online, with MoveSlots: a split. Called again with the
// same arguments after a failure, it resumes: a group already in the map
// with these members is not added twice, it waits for the moves to it
// that the map lists, and it moves slots until the new group holds half
// of what the two hold together. Called again once the split is done,
// with from 0, it changes nothing and returns ErrSplitDone (see
// splitDone); with from, it moves more slots from that group. While the
// map lists a move to another group, it refuses as MoveSlots does.
func (g *Group) AddGroup(ctx context.Context, id uint64, members []shardmap.Member, from uint64) error {
	mv := &mover{g: g, pool: ask.NewPool(g.cfg.Password)}
	defer mv.pool.Close()
	sh, err := g.splitMay(ctx, id, members, from)
	if err != nil {
		return err
	}
	added, err := mv.changeMap(ctx, func(cur *shardmap.Map) (*shardmap.Map, error) {
		if cur.Group(id) != nil {
			return nil, nil
		}
		return cur.WithGroup(shardmap.Group{ID: id, Members: members})
	})
	if err != nil {
		return err
	}
	if err := mv.await(ctx, added.Epoch, func(m *shardmap.Map) (bool, error) { return len(m.Moves) == 0, nil }); err != nil {
		return err
	}
	if from == 0 {
		if sh, err = g.ShardStatus(ctx); err != nil {
			return err
		}
		if src := largest(sh.Map, id); src != nil {
			from = src.ID
		}
	}
	for {
		if sh, err = g.ShardStatus(ctx); err != nil {
			return err
		}
		src, dst := sh.Map.Group(from), sh.Map.Group(id)
		if src == nil || from == id {
			return fmt.Errorf("clusterctl: no group %d to take slots from", from)
		}
		want := (src.Count()+dst.Count())/2 - dst.Count()
		if want <= 0 {
			return nil
		}
		r := src.Top(want)
		last := r[len(r)-1]
		if err := g.MoveSlots(ctx, last.First, last.Last, id); err != nil {
			return err
		}
	}
}

// ErrSplitDone says that AddGroup or AddHostedGroup, run again with no
// group to take slots from, found the split done, and changed nothing.
var ErrSplitDone = errors.New("clusterctl: the split is done")

// splitDone returns ErrSplitDone, with the group's slots, if from is 0 and
// m has group id with these members, owning slots, and no move to or from
// it under way: an AddGroup that finished (or, if it failed between two
// of its moves, one that moved some of the slots: run it again with from).
// Without this, a second AddGroup would split the largest group again.
func splitDone(m *shardmap.Map, id uint64, members []shardmap.Member, from uint64) error {
	gr := m.Group(id)
	if from != 0 || gr == nil || !slices.Equal(gr.Members, members) || gr.Count() == 0 ||
		slices.ContainsFunc(m.Moves, func(mv shardmap.Move) bool { return mv.To == id || mv.From == id }) {
		return nil
	}
	return fmt.Errorf("%w: group %d is in the map already, with these members, and owns %d slots, none of them moving", ErrSplitDone, id, gr.Count())
}

// largest returns the group of m with the most slots, other than id.
func largest(m *shardmap.Map, id uint64) *shardmap.Group {
	var best *shardmap.Group
	for i := range m.Groups {
		if gr := &m.Groups[i]; gr.ID != id && (best == nil || gr.Count() > best.Count()) {
			best = gr
		}
	}
	return best
}

// Rebalance moves slots between the data groups, online, until each owns
// its even share of the slots the map assigns (as many as the others, give
// or take one; the groups of lower ids get the one more), and returns how
// many slots it moved. It takes from a group with more than its share the
// slots at the top of its ranges, and moves them with MoveSlots. While
// the map lists a move, it refuses as MoveSlots does.
func (g *Group) Rebalance(ctx context.Context) (int, error) {
	moved := 0
	for {
		sh, err := g.shardStatusWait(ctx)
		if err != nil {
			return moved, err
		}
		if err := refuseMoves(sh.Map, func(shardmap.Move) bool { return false }); err != nil {
			return moved, err
		}
		from, to, n := nextRebalance(sh.Map)
		if n == 0 {
			return moved, nil
		}
		src := sh.Map.Group(from)
		r := src.Top(n)
		last := r[len(r)-1]
		if err := g.MoveSlots(ctx, last.First, last.Last, to); err != nil {
			return moved, err
		}
		moved += last.Last - last.First + 1
	}
}

// nextRebalance returns the next move of a rebalance of m: n slots from
// the group with the most slots over its share to the one with the most
// under its, or n 0 once every group has its share.
func nextRebalance(m *shardmap.Map) (from, to uint64, n int) {
	total := m.Covered()
	if len(m.Groups) == 0 || total == 0 {
		return 0, 0, 0
	}
	over, under := 0, 0
	for i, gr := range m.Groups {
		share := total / len(m.Groups)
		if i < total%len(m.Groups) {
			share++
		}
		switch d := gr.Count() - share; {
		case d > over:
			from, over = gr.ID, d
		case -d > under:
			to, under = gr.ID, -d
		}
	}
	return from, to, min(over, under)
}
