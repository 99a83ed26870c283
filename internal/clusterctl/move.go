package clusterctl

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

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

// MoveInProgressError refuses a change of the slots' owners while
// the map lists a move that is not the change's own: the managers are
// taking its steps. Nothing was changed.
type MoveInProgressError struct{ Move shardmap.Move }

func (e *MoveInProgressError) Error() string {
	what := "is in progress: wait for it to end, or give it up (flint cluster move-slots --abort)"
	if e.Move.Abort {
		what = "is being given up: wait for it to end"
	}
	return fmt.Sprintf("clusterctl: a move of slots %d-%d to group %d %s", e.Move.Slots.First, e.Move.Slots.Last, e.Move.To, what)
}

// MoveSlots moves the slots first to last to group to, while the cluster
// serves: it records in the map one move per range of them that another
// group owns (docs/SHARDING.md, "Moving slots"), and returns once the map
// lists none of them and gives the slots to group to. The managers take
// the moves' steps (DriveMoves), so the moves go on if the call fails or
// is stopped once it recorded them; called again with the same arguments,
// it records nothing more and waits for them. While the map lists a move
// that this call would not record (another change's), it refuses with a
// *MoveInProgressError and changes nothing.
func (g *Group) MoveSlots(ctx context.Context, first, last int, to uint64) error {
	mv := &mover{g: g, pool: ask.NewPool(g.cfg.Password)}
	defer mv.pool.Close()
	recorded, err := mv.changeMap(ctx, func(cur *shardmap.Map) (*shardmap.Map, error) {
		if cur.Group(to) == nil {
			return nil, fmt.Errorf("clusterctl: no group %d in the map", to)
		}
		moves, err := request(cur, first, last, to)
		if err != nil || len(moves) == len(cur.Moves) {
			return nil, err
		}
		return cur.WithMoves(moves, nil)
	})
	if err != nil {
		return err
	}
	return mv.await(ctx, recorded.Epoch, func(m *shardmap.Map) (bool, error) {
		if slices.ContainsFunc(m.Moves, func(o shardmap.Move) bool { return o.Slots.First <= last && o.Slots.Last >= first }) {
			return false, nil
		}
		for s := first; s <= last; s++ {
			if o := m.Owner(s); o != nil && o.ID != to {
				return true, fmt.Errorf("clusterctl: slot %d belongs to group %d, not %d: its move was given up", s, o.ID, to)
			}
		}
		return true, nil
	})
}

// request returns the moves of cur with those added that give the slots
// first to last to group to: one per range of them that another group
// owns and no listed move holds. It refuses if cur lists a move other
// than one of those: of other slots, to another group, or being given up.
func request(cur *shardmap.Map, first, last int, to uint64) ([]shardmap.Move, error) {
	for _, o := range cur.Moves {
		if o.To != to || o.Abort || o.Slots.First < first || o.Slots.Last > last {
			return nil, &MoveInProgressError{Move: o}
		}
	}
	moves := slices.Clone(cur.Moves)
	for _, m := range planMoves(cur, first, last, to) {
		moves = insertMove(moves, m)
	}
	return moves, nil
}

// refuseMoves returns a *MoveInProgressError for the first move m lists
// that ours does not accept, or nil.
func refuseMoves(m *shardmap.Map, ours func(shardmap.Move) bool) error {
	for _, o := range m.Moves {
		if !ours(o) {
			return &MoveInProgressError{Move: o}
		}
	}
	return nil
}

// await reads the managers' map until done says it is done, and returns
// done's error; it passes over a map of an epoch before since (a manager
// that has not read the latest yet), and tries again while no manager
// answers, until ctx ends.
func (mv *mover) await(ctx context.Context, since uint64, done func(*shardmap.Map) (bool, error)) error {
	var last error
	for wait := backoff.New(backoff.DefaultMin, 100*time.Millisecond); ; {
		sh, err := mv.g.ShardStatus(ctx)
		if err == nil && sh.Map.Epoch >= since {
			if ok, err := done(sh.Map); ok {
				return err
			}
		} else {
			last = err
		}
		if wait.Wait(ctx) != nil {
			return fmt.Errorf("clusterctl: waiting for the managers to move the slots: %w (last: %v)", ctx.Err(), last)
		}
	}
}

// DriveMoves takes the steps of the moves the map lists, the first one
// first, until it lists none: it finishes each, or gives it up if the map
// marks it Abort and its source has not stopped serving its slots (logged
// Gone). It is the managers' (package node runs it at the meta group's
// leader), and two calls must not take steps at once: one could clear
// (DROP ... 0) the copy that the other then opens. fence, if not nil, is
// called before each step, and stops DriveMoves with its error: the
// caller's check that it is still the one that may take steps. It returns
// the term of the caller's lead (its meta group's raft term; 0 for a
// caller that always leads), which each step carries (FLINT.SLOTS FENCE):
// a group refuses a step of a term below one it took a step of, so that a
// step sent by a caller that lost its lead, and taken late, after its
// successor's first step there, changes nothing (see "Fencing" below).
// Each step is logged in the map or in a group's log and taken again
// harmlessly, so a call stopped anywhere is resumed by the next: the
// protocol is in docs/SHARDING.md, "Moving slots".
//
// # Fencing
//
// The steps are idempotent, but not harmless when a deposed driver's step
// lands after its successor ended the move: a LEAVE after the move was
// given up (STAY) leaves the source refusing writes to the slots with no
// move listed to end it; an IMPORT after it leaves stale keys and an
// Importing record at the target, which refuse a later move of the same
// slots there from another group (its IMPORT and OPEN need the record's
// peer), so that the map would give the slots to a group that does not
// serve them. The map's own changes need no fence (FLINT.MAPSET takes
// only the next epoch: a late one fails), but the groups' steps do. A
// successor always takes a step at both groups of a move it finishes or
// gives up (LEAVE or DROP at the source, and DROP ... 0 or OPEN at the
// target) before it drops the move from the map, except one already done
// (Done), whose target steps the deposed driver had all been answered for
// before it could mark it done; so once a move is ended, both of its
// groups refuse the deposed driver's steps. Before its successor's first
// step at a group, a deposed driver's step may still land there, after the
// successor read the source's phase: a LEAVE or IMPORT is one the
// successor takes or clears anyway (LEAVE, DROP ... 0), and a GONE makes
// the source serve the slots no more, which abort checks after its STAY.
func (g *Group) DriveMoves(ctx context.Context, fence func(context.Context) (uint64, error)) error {
	mv := &mover{g: g, pool: ask.NewPool(g.cfg.Password), fence: fence}
	defer mv.pool.Close()
	for {
		sh, err := g.ShardStatus(ctx)
		if err != nil {
			return err
		}
		if len(sh.Map.Moves) == 0 {
			return nil
		}
		m, phase := sh.Map.Moves[0], ""
		if !m.Done {
			if phase, err = mv.phase(ctx, m.From, m.Slots.First); err != nil {
				return err
			}
		}
		if m.Abort && !m.Done && phase != "gone" {
			err = mv.abort(ctx, m)
		} else {
			err = mv.finish(ctx, m, phase)
		}
		if err != nil && !errors.Is(err, errAbortAsked) {
			return err
		}
	}
}

// errAbortAsked stops a move's copy once the map marks it Abort.
var errAbortAsked = errors.New("clusterctl: the move is to be given up")

// planMoves returns the moves that give the slots first to last to group
// to: one per range of them that another group owns and no move of m
// holds.
func planMoves(m *shardmap.Map, first, last int, to uint64) []shardmap.Move {
	var out []shardmap.Move
	for s := first; s <= last; s++ {
		g := m.Owner(s)
		if g == nil || g.ID == to || slices.ContainsFunc(m.Moves, func(o shardmap.Move) bool { return o.Slots.First <= s && s <= o.Slots.Last }) {
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
	g     *Group
	pool  *ask.Pool
	fence func(context.Context) (uint64, error) // see DriveMoves; nil: none, and steps unfenced
	// watch, while a move's keys are copied, is its slots: a step is not
	// taken once the map marks the move Abort (errAbortAsked).
	watch *shardmap.Range
}

// insertMove returns moves with m added in order of slot.
func insertMove(moves []shardmap.Move, m shardmap.Move) []shardmap.Move {
	out := append(slices.Clone(moves), m)
	slices.SortFunc(out, func(a, b shardmap.Move) int { return a.Slots.First - b.Slots.First })
	return out
}

// listed returns the index in m's moves of the move of slots r, or -1.
func listed(m *shardmap.Map, r shardmap.Range) int {
	return slices.IndexFunc(m.Moves, func(o shardmap.Move) bool { return o.Slots == r })
}

// finish takes the steps of move m that are left, as its source's phase
// (that of the record of its first slot there) and the map say.
func (mv *mover) finish(ctx context.Context, m shardmap.Move, phase string) error {
	r := m.Slots
	span := []string{strconv.Itoa(r.First), strconv.Itoa(r.Last)}
	from, to := strconv.FormatUint(m.From, 10), strconv.FormatUint(m.To, 10)
	if !m.Done {
		if phase != "gone" {
			mv.watch = &r
			err := mv.step(ctx, m.From, append([]string{"LEAVE"}, append(span, to)...)...)
			if err == nil {
				err = mv.copy(ctx, m)
			}
			if mv.watch = nil; err != nil {
				return err
			}
			if err := mv.step(ctx, m.From, append([]string{"GONE"}, append(span, to)...)...); err != nil {
				return err
			}
		}
		if err := mv.step(ctx, m.To, append([]string{"OPEN"}, append(span, from)...)...); err != nil {
			return err
		}
		m.Done, m.Abort = true, false
		if _, err := mv.changeMap(ctx, func(cur *shardmap.Map) (*shardmap.Map, error) {
			i := listed(cur, r)
			if i < 0 || cur.Moves[i].Done {
				return nil, nil
			}
			moves := slices.Delete(slices.Clone(cur.Moves), i, i+1)
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
	return mv.unlist(ctx, r)
}

// unlist drops the move of slots r from the map, if it lists it.
func (mv *mover) unlist(ctx context.Context, r shardmap.Range) error {
	_, err := mv.changeMap(ctx, func(cur *shardmap.Map) (*shardmap.Map, error) {
		i := listed(cur, r)
		if i < 0 {
			return nil, nil
		}
		return cur.WithMoves(slices.Delete(slices.Clone(cur.Moves), i, i+1), nil)
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
	_, err := mv.send(ctx, group, true, args...)
	return err
}

// leader sends FLINT.SLOTS args, a read, to group's leader (see send).
func (mv *mover) leader(ctx context.Context, group uint64, args ...string) (protocol.Value, error) {
	return mv.send(ctx, group, false, args...)
}

// send sends FLINT.SLOTS args to group's leader, trying its members in
// turn, the one the managers name first, until one serves it or ctx ends;
// a logged step with the term that the fence returns (FENCE term), if not
// 0.
func (mv *mover) send(ctx context.Context, group uint64, logged bool, args ...string) (protocol.Value, error) {
	var last error
	for wait := backoff.Default(); ; {
		sh, err := mv.g.ShardStatus(ctx)
		if err == nil && mv.watch != nil {
			if i := listed(sh.Map, *mv.watch); i >= 0 && sh.Map.Moves[i].Abort {
				return protocol.Value{}, errAbortAsked
			}
		}
		full := append([]string{"FLINT.SLOTS"}, args...)
		if err == nil && mv.fence != nil {
			term, err := mv.fence(ctx)
			if err != nil {
				return protocol.Value{}, err
			}
			if logged && term != 0 {
				full = append([]string{"FLINT.SLOTS", "FENCE", strconv.FormatUint(term, 10)}, args...)
			}
		}
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
				// a step is taken again harmlessly: UNKNOWN is retried too
				if errors.As(err, new(*client.ReplyError)) && !retryable(err) && !outcomeUnknown(err) {
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
// epoch, through FLINT.MAPSET at the meta group's leader (mapSet, which
// follows a follower's MOVED to it), reading the map again and retrying
// while another change came first, and after a backoff while no manager
// can take it (mapSet's errTryAgain), until ctx ends; next returns nil to
// change nothing. Any other refusal is returned. It returns the map it
// set, once a manager serves it.
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
			v, _, err := mapSet(ctx, mv.pool, mv.g.cfg.Addrs, string(m.Encode()))
			switch {
			case err == nil && v.Int == 1:
				return m, mv.awaitEpoch(ctx, m.Epoch)
			case err != nil && !errors.Is(err, errTryAgain) && ctx.Err() == nil:
				return nil, fmt.Errorf("clusterctl: changing the cluster map: %w", replyErr(err))
			case err != nil:
				last = err
			}
		}
		if wait.Wait(ctx) != nil {
			return nil, fmt.Errorf("clusterctl: changing the cluster map: %w (last: %v)", ctx.Err(), last)
		}
	}
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

// AbortMoves asks the managers to give up the moves the map lists (marks
// them Abort), and returns, once the map lists none of them, those given
// up: the managers give up a move whose source still serves its slots (the
// source serves writes to them again, STAY; the target deletes what it
// received, DROP ... 0; the map drops the move), and finish the others.
// Called again after a failure, it waits for them again.
func (g *Group) AbortMoves(ctx context.Context) ([]shardmap.Move, error) {
	mv := &mover{g: g, pool: ask.NewPool(g.cfg.Password)}
	defer mv.pool.Close()
	var asked []shardmap.Move
	marked, err := mv.changeMap(ctx, func(cur *shardmap.Map) (*shardmap.Map, error) {
		asked = slices.Clone(cur.Moves)
		moves := slices.Clone(cur.Moves)
		for i := range moves {
			moves[i].Abort = !moves[i].Done
		}
		if slices.Equal(moves, cur.Moves) {
			return nil, nil
		}
		return cur.WithMoves(moves, nil)
	})
	if err != nil {
		return nil, err
	}
	var given []shardmap.Move
	err = mv.await(ctx, marked.Epoch, func(m *shardmap.Map) (bool, error) {
		for _, a := range asked {
			if listed(m, a.Slots) >= 0 {
				return false, nil
			}
		}
		given = nil
		for _, a := range asked {
			if o := m.Owner(a.Slots.First); o != nil && o.ID == a.From {
				given = append(given, a)
			}
		}
		return true, nil
	})
	return given, err
}

// abort gives up move m, whose source was not Gone when its phase was
// read. A deposed driver's GONE may have landed since, which STAY then
// leaves alone: so abort reads the phase again after STAY (the source's
// fence refuses that driver's steps from there on) and, if Gone, leaves
// the move for DriveMoves to finish, rather than delete the target's copy
// of keys that the source serves no more.
func (mv *mover) abort(ctx context.Context, m shardmap.Move) error {
	span := []string{strconv.Itoa(m.Slots.First), strconv.Itoa(m.Slots.Last)}
	from, to := strconv.FormatUint(m.From, 10), strconv.FormatUint(m.To, 10)
	if err := mv.step(ctx, m.From, append([]string{"STAY"}, append(span, to)...)...); err != nil {
		return err
	}
	if phase, err := mv.phase(ctx, m.From, m.Slots.First); err != nil || phase == "gone" {
		return err
	}
	if err := mv.step(ctx, m.To, append([]string{"DROP"}, append(span, from, "0")...)...); err != nil {
		return err
	}
	return mv.unlist(ctx, m.Slots)
}
