package clusterctl

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/flintkv/flint/client"
	"github.com/flintkv/flint/internal/ask"
	"github.com/flintkv/flint/internal/backoff"
	"github.com/flintkv/flint/internal/protocol"
	"github.com/flintkv/flint/internal/shardmap"
)

// moveBatch is how many keys one FLINT.SLOTS EXPORT reads and one IMPORT
// logs, and how many sessions one SESSIONS reads: so that a move's log
// entries stay small however many keys move.
const moveBatch = 256

// MoveSlots moves the slots first to last to group to, while the cluster
// serves, and returns once the managers' map gives them to it and their
// old groups have deleted their copies. g's addresses are the managers'.
// Moves left half done by an earlier call (the map lists them) are
// finished first. Each step is logged in the map or in a group's log and
// taken again harmlessly, so a call that fails (a group or the managers
// unreachable until ctx ends) is resumed by calling it again, with any
// slots: the protocol is in docs/SHARDING.md, "Moving slots".
func (g *Group) MoveSlots(ctx context.Context, first, last int, to uint64) error {
	mv := &mover{g: g, pool: ask.NewPool(g.cfg.Password)}
	defer mv.pool.Close()
	if err := mv.finishAll(ctx); err != nil {
		return err
	}
	sh, err := g.ShardStatus(ctx)
	if err != nil {
		return err
	}
	if sh.Map.Group(to) == nil {
		return fmt.Errorf("clusterctl: no group %d in the map", to)
	}
	for _, m := range planMoves(sh.Map, first, last, to) {
		if err := mv.start(ctx, m); err != nil {
			return err
		}
		if err := mv.finishAll(ctx); err != nil {
			return err
		}
	}
	return nil
}

// finishAll finishes every move the map lists, one after another, until
// it lists none. The managers serve the map as they last read it, so a
// move recorded a moment ago by another call may show only on the next
// read: finishAll after start sees it, since start's change was made on
// the map that holds it.
func (mv *mover) finishAll(ctx context.Context) error {
	for {
		sh, err := mv.g.ShardStatus(ctx)
		if err != nil {
			return err
		}
		if len(sh.Map.Moves) == 0 {
			return nil
		}
		if err := mv.finish(ctx, sh.Map.Moves[0]); err != nil {
			return err
		}
	}
}

// planMoves returns the moves that give the slots first to last to group
// to: one per range of them that another group owns.
func planMoves(m *shardmap.Map, first, last int, to uint64) []shardmap.Move {
	var out []shardmap.Move
	for s := first; s <= last; s++ {
		g := m.Owner(s)
		if g == nil || g.ID == to {
			continue
		}
		if n := len(out); n > 0 && out[n-1].From == g.ID && out[n-1].Slots.Last == s-1 {
			out[n-1].Slots.Last = s
			continue
		}
		out = append(out, shardmap.Move{Slots: shardmap.Range{First: s, Last: s}, From: g.ID, To: to})
	}
	return out
}

// mover takes the steps of moves.
type mover struct {
	g    *Group
	pool *ask.Pool
}

// start records m in the map, unless it is there already.
func (mv *mover) start(ctx context.Context, m shardmap.Move) error {
	_, err := mv.changeMap(ctx, func(cur *shardmap.Map) (*shardmap.Map, error) {
		if slices.Contains(cur.Moves, m) {
			return nil, nil
		}
		return cur.WithMoves(insertMove(cur.Moves, m), nil)
	})
	return err
}

// insertMove returns moves with m added in order of slot.
func insertMove(moves []shardmap.Move, m shardmap.Move) []shardmap.Move {
	out := append(slices.Clone(moves), m)
	slices.SortFunc(out, func(a, b shardmap.Move) int { return a.Slots.First - b.Slots.First })
	return out
}

// finish takes the steps of move m that are left, as its groups' records
// and the map say.
func (mv *mover) finish(ctx context.Context, m shardmap.Move) error {
	r := m.Slots
	span := []string{strconv.Itoa(r.First), strconv.Itoa(r.Last)}
	from, to := strconv.FormatUint(m.From, 10), strconv.FormatUint(m.To, 10)
	if !m.Done {
		phase, err := mv.phase(ctx, m.From, r.First)
		if err != nil {
			return err
		}
		if phase != "gone" {
			if err := mv.step(ctx, m.From, append([]string{"LEAVE"}, append(span, to)...)...); err != nil {
				return err
			}
			if err := mv.copy(ctx, m); err != nil {
				return err
			}
			if err := mv.step(ctx, m.From, append([]string{"GONE"}, append(span, to)...)...); err != nil {
				return err
			}
		}
		if err := mv.step(ctx, m.To, append([]string{"OPEN"}, append(span, from)...)...); err != nil {
			return err
		}
		m.Done = true
		if _, err := mv.changeMap(ctx, func(cur *shardmap.Map) (*shardmap.Map, error) {
			moves := slices.DeleteFunc(slices.Clone(cur.Moves), func(o shardmap.Move) bool { return o.Slots == r })
			return cur.WithMoves(insertMove(moves, m), map[shardmap.Range]uint64{r: m.To})
		}); err != nil {
			return err
		}
	}
	sh, err := mv.g.ShardStatus(ctx)
	if err != nil {
		return err
	}
	epoch := strconv.FormatUint(sh.Map.Epoch, 10)
	if err := mv.step(ctx, m.From, append([]string{"DROP"}, append(span, to, epoch)...)...); err != nil {
		return err
	}
	_, err = mv.changeMap(ctx, func(cur *shardmap.Map) (*shardmap.Map, error) {
		moves := slices.DeleteFunc(slices.Clone(cur.Moves), func(o shardmap.Move) bool { return o.Slots == r })
		return cur.WithMoves(moves, nil)
	})
	return err
}

// copy copies the keys of m's slots from its source to its target, after
// clearing what an earlier, unfinished copy left there, then every session
// of the source.
func (mv *mover) copy(ctx context.Context, m shardmap.Move) error {
	span := []string{strconv.Itoa(m.Slots.First), strconv.Itoa(m.Slots.Last)}
	from := strconv.FormatUint(m.From, 10)
	if err := mv.step(ctx, m.To, append([]string{"DROP"}, append(span, from, "0")...)...); err != nil {
		return err
	}
	batch := strconv.Itoa(moveBatch)
	for after := ""; ; {
		v, err := mv.leader(ctx, m.From, append([]string{"EXPORT"}, append(span, after, batch)...)...)
		if err != nil {
			return err
		}
		if len(v.Elems) != 2 {
			return fmt.Errorf("clusterctl: FLINT.SLOTS EXPORT replied %v", v)
		}
		if pairs := v.Elems[1].Elems; len(pairs) > 0 {
			args := append([]string{"IMPORT"}, append(span, from)...)
			for _, p := range pairs {
				args = append(args, string(p.Str))
			}
			if err := mv.step(ctx, m.To, args...); err != nil {
				return err
			}
		}
		if after = string(v.Elems[0].Str); after == "" {
			break
		}
	}
	for after := "0"; ; {
		v, err := mv.leader(ctx, m.From, "SESSIONS", after, batch)
		if err != nil {
			return err
		}
		if len(v.Elems) != 2 {
			return fmt.Errorf("clusterctl: FLINT.SLOTS SESSIONS replied %v", v)
		}
		next := strconv.FormatInt(v.Elems[0].Int, 10)
		if next == after {
			return nil
		}
		if err := mv.step(ctx, m.To, "SESSIONS-IMPORT", string(v.Elems[1].Str)); err != nil {
			return err
		}
		after = next
	}
}

// phase returns the phase of slot s's record in group, "" if none.
func (mv *mover) phase(ctx context.Context, group uint64, s int) (string, error) {
	v, err := mv.leader(ctx, group, "STATUS")
	if err != nil {
		return "", err
	}
	for _, rec := range v.Elems {
		if len(rec.Elems) == 5 && int(rec.Elems[0].Int) <= s && s <= int(rec.Elems[1].Int) {
			return string(rec.Elems[2].Str), nil
		}
	}
	return "", nil
}

// step sends a logged step of FLINT.SLOTS to group's leader. A step the
// records refuse (0) was taken already, by an earlier call or a retry
// whose reply was lost, or cannot be taken: the phase checks before and
// after each step tell which, so it is not an error here.
func (mv *mover) step(ctx context.Context, group uint64, args ...string) error {
	_, err := mv.leader(ctx, group, args...)
	return err
}

// leader sends FLINT.SLOTS args to group's leader, trying its members in
// turn, the one the managers name first, until one serves it or ctx ends.
func (mv *mover) leader(ctx context.Context, group uint64, args ...string) (protocol.Value, error) {
	full := append([]string{"FLINT.SLOTS"}, args...)
	var last error
	for wait := backoff.Default(); ; {
		sh, err := mv.g.ShardStatus(ctx)
		if err == nil {
			g := sh.Map.Group(group)
			if g == nil {
				return protocol.Value{}, fmt.Errorf("clusterctl: no group %d in the map", group)
			}
			members := slices.Clone(g.Members)
			slices.SortStableFunc(members, func(a, b shardmap.Member) int {
				return b2i(b.ID == sh.Leaders[group]) - b2i(a.ID == sh.Leaders[group])
			})
			for _, m := range members {
				v, err := mv.pool.One(ctx, m.Addr, full...)
				if err == nil {
					return v, nil
				}
				last = err
				var re *client.ReplyError // a step is taken again harmlessly: UNKNOWN is retried too
				if errors.As(err, &re) && !retryable(err) && !strings.HasPrefix(re.Msg, "UNKNOWN ") {
					return protocol.Value{}, fmt.Errorf("clusterctl: group %d: FLINT.SLOTS %s: %w", group, args[0], err)
				}
			}
		} else {
			last = err
		}
		if wait.Wait(ctx) != nil {
			return protocol.Value{}, fmt.Errorf("clusterctl: group %d: FLINT.SLOTS %s: %w (last: %v)", group, args[0], ctx.Err(), last)
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// changeMap makes next(the managers' map) the cluster's map, at the next
// epoch, through FLINT.MAPSET at a manager that accepts it, reading the map
// again and retrying while another change came first; next returns nil to
// change nothing. It returns the map it set, once a manager serves it.
func (mv *mover) changeMap(ctx context.Context, next func(*shardmap.Map) (*shardmap.Map, error)) (*shardmap.Map, error) {
	var last error
	for wait := backoff.Default(); ; {
		if sh, err := mv.g.ShardStatus(ctx); err != nil {
			last = err
		} else {
			m, err := next(sh.Map)
			if err != nil || m == nil {
				return sh.Map, err
			}
			if ok, err := mv.setMap(ctx, m); ok {
				return m, mv.awaitEpoch(ctx, m.Epoch)
			} else if err != nil {
				last = err
			}
		}
		if wait.Wait(ctx) != nil {
			return nil, fmt.Errorf("clusterctl: changing the cluster map: %w (last: %v)", ctx.Err(), last)
		}
	}
}

// setMap sends FLINT.MAPSET m to each manager until one takes it, and
// reports whether one did.
func (mv *mover) setMap(ctx context.Context, m *shardmap.Map) (bool, error) {
	var last error
	for _, addr := range mv.g.cfg.Addrs {
		v, err := mv.pool.One(ctx, addr, "FLINT.MAPSET", string(m.Encode()))
		switch {
		case err == nil:
			return v.Int == 1, nil
		default:
			last = err
		}
	}
	return false, last
}

// awaitEpoch waits until a manager serves a map of epoch e or later, so
// that the next ShardStatus reads it.
func (mv *mover) awaitEpoch(ctx context.Context, e uint64) error {
	for wait := backoff.Default(); ; {
		if sh, err := mv.g.ShardStatus(ctx); err == nil && sh.Map.Epoch >= e {
			return nil
		}
		if wait.Wait(ctx) != nil {
			return fmt.Errorf("clusterctl: waiting for the managers to serve map epoch %d: %w", e, ctx.Err())
		}
	}
}

// AbortMoves gives up the moves the map lists that can still be given up:
// those whose source is not Gone yet. For each, the source serves writes
// to the slots again (STAY), the target deletes what it received of them
// (DROP ... 0), and the map drops the move. A move past that point goes
// forward instead, as MoveSlots would take it. Called again after a
// failure, it takes the steps left. It returns the moves it gave up.
func (g *Group) AbortMoves(ctx context.Context) ([]shardmap.Move, error) {
	mv := &mover{g: g, pool: ask.NewPool(g.cfg.Password)}
	defer mv.pool.Close()
	var aborted []shardmap.Move
	for {
		sh, err := g.ShardStatus(ctx)
		if err != nil {
			return aborted, err
		}
		if len(sh.Map.Moves) == 0 {
			return aborted, nil
		}
		m := sh.Map.Moves[0]
		if phase, err := mv.phase(ctx, m.From, m.Slots.First); err != nil {
			return aborted, err
		} else if m.Done || phase == "gone" {
			if err := mv.finish(ctx, m); err != nil {
				return aborted, err
			}
			continue
		}
		if err := mv.abort(ctx, m); err != nil {
			return aborted, err
		}
		aborted = append(aborted, m)
	}
}

// abort gives up move m, whose source is not Gone.
func (mv *mover) abort(ctx context.Context, m shardmap.Move) error {
	span := []string{strconv.Itoa(m.Slots.First), strconv.Itoa(m.Slots.Last)}
	from, to := strconv.FormatUint(m.From, 10), strconv.FormatUint(m.To, 10)
	if err := mv.step(ctx, m.From, append([]string{"STAY"}, append(span, to)...)...); err != nil {
		return err
	}
	if err := mv.step(ctx, m.To, append([]string{"DROP"}, append(span, from, "0")...)...); err != nil {
		return err
	}
	_, err := mv.changeMap(ctx, func(cur *shardmap.Map) (*shardmap.Map, error) {
		moves := slices.DeleteFunc(slices.Clone(cur.Moves), func(o shardmap.Move) bool { return o.Slots == m.Slots })
		return cur.WithMoves(moves, nil)
	})
	return err
}
