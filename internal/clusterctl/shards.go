package clusterctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/flintkv/flint/client"
	"github.com/flintkv/flint/internal/ask"
	"github.com/flintkv/flint/internal/backoff"
	"github.com/flintkv/flint/internal/shardmap"
	"github.com/flintkv/flint/internal/slot"
)

// Shards is a sharded cluster as a manager sees it: the cluster map, each
// group's leader as it last learned it, and the members that did not
// answer its last poll.
type Shards struct {
	Map     *shardmap.Map
	Leaders map[uint64]uint64
	Down    map[shardmap.MemberKey]bool
}

// ErrNotManager says that the server asked is not a manager of a sharded
// cluster (it may be a member of one of its groups, or of a group that is
// not sharded).
var ErrNotManager = errors.New("clusterctl: the server at that address is not a manager of a sharded cluster")

// ErrNoMap says that the manager asked holds no cluster map: it was
// started without one, and no `flint cluster create` has written one yet.
var ErrNoMap = errors.New("clusterctl: the managers hold no cluster map yet (flint cluster create writes the first)")

// ShardStatus asks the first of Config.Addrs that answers, if it is a
// manager (a node of a sharded cluster whose node id names no group), for
// the cluster; else it fails with ErrNotManager. A manager that does not
// serve the map is passed over for the next address: it may have
// restarted, and not read the map from its meta group yet. If none serves
// it, the error is ErrNoMap if the last manager said it holds none, else
// ErrNotManager's, with its reply.
func (g *Group) ShardStatus(ctx context.Context) (Shards, error) {
	var err, mapErr error
	for _, addr := range g.cfg.Addrs {
		var id string
		if id, err = askMyID(ctx, addr, g.cfg.Password); err != nil {
			if errors.As(err, new(*client.ReplyError)) { // a single node: no cluster commands
				return Shards{}, ErrNotManager
			}
			continue
		}
		if !strings.HasPrefix(id, strings.Repeat("0", 24)) {
			return Shards{}, ErrNotManager
		}
		m, leaders, down, err := ask.Map(ctx, addr, g.cfg.Password)
		if re := new(client.ReplyError); errors.As(err, &re) && strings.HasPrefix(re.Msg, "CLUSTERDOWN ") {
			mapErr = ErrNoMap
			continue
		}
		if err != nil {
			mapErr = fmt.Errorf("%w: %v", ErrNotManager, err)
			continue
		}
		return Shards{Map: m, Leaders: leaders, Down: down}, nil
	}
	if mapErr != nil {
		return Shards{}, mapErr
	}
	return Shards{}, fmt.Errorf("%w at %s: %w", errNoAnswer, strings.Join(g.cfg.Addrs, ","), replyErr(err))
}

// errNoAnswer says that no address given answered ShardStatus.
var errNoAnswer = errors.New("clusterctl: no node answers")

// shardStatusWait is ShardStatus, asked again while no address answers (a
// lone manager restarting, say), until ctx ends: for the commands that
// begin by reading the map, which would otherwise fail at once where
// their later steps wait.
func (g *Group) shardStatusWait(ctx context.Context) (Shards, error) {
	for wait := backoff.New(backoff.DefaultMin, 500*time.Millisecond); ; {
		sh, err := g.ShardStatus(ctx)
		if !errors.Is(err, errNoAnswer) {
			return sh, err
		}
		if wait.Wait(ctx) != nil {
			return sh, fmt.Errorf("%w (asked until: %v)", err, ctx.Err())
		}
	}
}

// askMyID returns the node id of the node at addr (CLUSTER MYID).
func askMyID(ctx context.Context, addr, password string) (string, error) {
	v, err := ask.One(ctx, addr, password, "CLUSTER", "MYID")
	if err != nil {
		return "", err
	}
	return string(v.Str), nil
}

// Write prints sh as a table of each group's members, with a line about
// the cluster above it.
func (sh Shards) Write(w io.Writer) error {
	led := 0
	for _, g := range sh.Map.Groups {
		if _, ok := sh.Leaders[g.ID]; ok {
			led++
		}
	}
	fmt.Fprintf(w, "map epoch %d: %d groups, %d of %d slots assigned, %d groups with a leader\n",
		sh.Map.Epoch, len(sh.Map.Groups), sh.Map.Covered(), slot.Count, led)
	for _, mv := range sh.Map.Moves {
		step := "copying keys; the source still owns them"
		switch {
		case mv.Done:
			step = "the target owns them; the source is deleting its copies"
		case mv.Abort:
			step = "being given up, unless the source no longer serves them"
		}
		fmt.Fprintf(w, "moving slots %d-%d from group %d to group %d: %s\n", mv.Slots.First, mv.Slots.Last, mv.From, mv.To, step)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tSLOTS\tMEMBER\tADDRESS\tSTATE")
	for _, g := range sh.Map.Groups {
		ranges := make([]string, len(g.Slots))
		for i, r := range g.Slots {
			ranges[i] = fmt.Sprintf("%d-%d", r.First, r.Last)
		}
		for i, m := range g.Members {
			group, slots := "", ""
			if i == 0 {
				group, slots = fmt.Sprint(g.ID), strings.Join(ranges, ",")
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", group, slots, m.ID, m.Addr, sh.state(g.ID, m.ID))
		}
	}
	return tw.Flush()
}

// state is a member's state as the manager saw it.
func (sh Shards) state(group, member uint64) string {
	switch {
	case sh.Down[shardmap.MemberKey{Group: group, Member: member}]:
		return "down"
	case sh.Leaders[group] == member:
		return "leader"
	}
	return "up"
}
