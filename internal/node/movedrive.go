package node

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/flintkv/flint/internal/clusterctl"
	"github.com/flintkv/flint/internal/replica"
	"go.etcd.io/raft/v3"
)

// moveGrace is how long a manager of a replicated meta group leads it
// before it takes the steps of slot moves: long enough for a deposed
// leader, which loses its lead within an election timeout (CheckQuorum),
// to have stopped taking them, so that two managers rarely take a move's
// steps at once (see clusterctl.DriveMoves). The fence before each step
// covers the rest: it confirms the lead, and each step carries the term
// of it, so that a group refuses a deposed leader's step that arrives
// after its successor's first step there.
const moveGrace = 2 * time.Second

// moveCheck is how often a manager looks at its view of the map for moves
// to take the steps of: a move-slots waits for it, and the look is an
// atomic load.
const moveCheck = 20 * time.Millisecond

// mover is what driveMoves needs of the manager it runs at.
type mover struct {
	// leads reports whether this manager leads its meta group, as it
	// believes now.
	leads func() bool
	// fence returns the meta group's term if this manager still leads
	// in it, confirmed by a majority of its group (nil for a manager of
	// one member: its steps carry no term).
	fence func(context.Context) (uint64, error)
	// managers returns the managers' client addresses, this one's first.
	managers func() []string
	grace    time.Duration // moveGrace, or 0 for a manager of one member
}

// driveMoves takes the steps of the slot moves the map lists, at the
// manager that leads the meta group, once it has led for mv.grace, until
// ctx ends: `flint cluster move-slots` only records a move in the map, and
// the managers carry it out, whatever becomes of the command, resuming
// after a leader change or a restart from the steps logged. While it takes
// steps it checks every poll that it still leads, and stops if not.
func driveMoves(ctx context.Context, cfg *ShardConfig, v *shardView, mv mover, log *slog.Logger) {
	var since time.Time // when this manager was first seen leading, in its current lead
	var lastErr string
	for ; ; sleep(ctx, moveCheck) {
		if ctx.Err() != nil {
			return
		}
		if !mv.leads() {
			since = time.Time{}
			continue
		}
		if since.IsZero() {
			since = time.Now()
		}
		if sh := v.Shards(); sh.Map == nil || len(sh.Map.Moves) == 0 || time.Since(since) < mv.grace {
			continue
		}
		err := driveWhileLeading(ctx, cfg, mv)
		switch {
		case err == nil:
			log.Info("the slot moves the map listed are done")
			lastErr = ""
		case ctx.Err() == nil && err.Error() != lastErr:
			log.Warn("cannot take the steps of a slot move now; trying again", "err", err)
			lastErr = err.Error()
		}
	}
}

// driveWhileLeading runs clusterctl.DriveMoves until it returns or this
// manager no longer leads.
func driveWhileLeading(ctx context.Context, cfg *ShardConfig, mv mover) error {
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for sleep(dctx, cfg.poll()) {
			if !mv.leads() {
				cancel()
			}
		}
	}()
	g, err := clusterctl.Dial(clusterctl.Config{Addrs: mv.managers(), Password: cfg.Password})
	if err != nil {
		return err
	}
	defer g.Close()
	return g.DriveMoves(dctx, mv.fence)
}

// errNotLeading stops the steps of a move at a manager that no longer
// leads its meta group.
var errNotLeading = errors.New("node: this manager no longer leads the meta group; its new leader takes the slot moves' steps")

// memberMover is the mover of rep, member self of a replicated meta group.
func memberMover(rep *replica.Replica, self uint64) mover {
	return mover{
		leads: func() bool { return rep.Leader() == self },
		fence: func(ctx context.Context) (uint64, error) {
			if err := rep.ReadBarrier(ctx); err != nil {
				return 0, err
			}
			st, err := rep.Status(ctx)
			if err != nil {
				return 0, err
			}
			if st.RaftState != raft.StateLeader || st.Lead != self {
				return 0, errNotLeading
			}
			return st.Term, nil
		},
		managers: func() []string {
			own, _ := parseInfo(rep.MemberInfo(self))
			addrs := []string{own}
			for id, info := range rep.Members() {
				if c, _ := parseInfo(info); id != self && c != "" {
					addrs = append(addrs, c)
				}
			}
			return addrs
		},
		grace: moveGrace,
	}
}

// localMover is the mover of a manager of one member, at addr: it always
// leads.
func localMover(addr string) mover {
	return mover{leads: func() bool { return true }, managers: func() []string { return []string{addr} }}
}
