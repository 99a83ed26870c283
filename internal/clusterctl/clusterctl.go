// Package clusterctl operates a running replicated group from outside, as
// `flint cluster add|remove|transfer|status` does: it finds the group's
// leader from any members' client addresses, sends it the admin command
// FLINT.MEMBER ADD|REMOVE|TRANSFER, and reports the members' state from
// what each serves (INFO replication, CLUSTER NODES). It speaks only the
// client protocol, through Flint's Go client, which follows the leader
// (CLUSTER SLOTS, MOVED) and retries while a group has none.
package clusterctl

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/flintkv/flint/client"
)

// Config says how to reach a group.
type Config struct {
	Addrs    []string // client addresses (host:port) of one or more members
	Password string   // AUTH password, if the members require one
}

// Group is a connection to a replicated group, through whichever member
// leads. Its methods may be called from one goroutine at a time.
type Group struct {
	cfg Config
	c   *client.Client
}

// ErrNotReplicated says that the server is not a member of a replicated
// group: a single node has no members to change.
var ErrNotReplicated = errors.New("clusterctl: the server at that address is not a member of a replicated group")

// Dial connects to the first of cfg.Addrs that answers. The error wraps
// client.ErrConnect if none does.
func Dial(cfg Config) (*Group, error) {
	if len(cfg.Addrs) == 0 {
		return nil, errors.New("clusterctl: no member address")
	}
	c, err := client.New(cfg.Addrs[0], client.WithSeeds(cfg.Addrs[1:]...), client.WithPassword(cfg.Password),
		client.WithPoolSize(1))
	if err != nil {
		return nil, err
	}
	return &Group{cfg: cfg, c: c}, nil
}

// Close closes the connections.
func (g *Group) Close() error { return g.c.Close() }

// Add adds member id, whose addresses are client-host:port@peerport, to
// the group: as a learner, which the leader catches up, then as a voter.
// It returns once the member votes; the member must be running (`flint
// serve --join`) for it to catch up.
func (g *Group) Add(ctx context.Context, id uint64, addrs string) error {
	return g.member(ctx, "ADD", id, addrs)
}

// Remove removes member id from the group; it stops serving. A leader is
// not removed while it leads: leadership goes first to the voter whose log
// is the most complete, which Remove returns (0 if none moved).
func (g *Group) Remove(ctx context.Context, id uint64) (movedTo uint64, err error) {
	st, err := g.Status(ctx)
	if err != nil {
		return 0, err
	}
	if st.Leader == id {
		if movedTo = st.successor(); movedTo == 0 {
			return 0, fmt.Errorf("clusterctl: member %d leads and no other voter can take over: a group's last voter cannot be removed", id)
		}
		if err := g.Transfer(ctx, movedTo); err != nil {
			return 0, fmt.Errorf("moving leadership away from member %d first: %w", id, err)
		}
	}
	return movedTo, g.member(ctx, "REMOVE", id)
}

// Transfer hands the group's leadership to member id, and returns once it
// leads.
func (g *Group) Transfer(ctx context.Context, id uint64) error {
	return g.member(ctx, "TRANSFER", id)
}

// member sends FLINT.MEMBER sub id args... to the leader.
func (g *Group) member(ctx context.Context, sub string, id uint64, args ...string) error {
	cmd := []any{"FLINT.MEMBER", sub, strconv.FormatUint(id, 10)}
	for _, a := range args {
		cmd = append(cmd, a)
	}
	_, err := g.c.Do(ctx, cmd...)
	return replyErr(err)
}

// replyErr turns the server's refusal of a command into an error with its
// message alone, and a single node's into ErrNotReplicated.
func replyErr(err error) error {
	var re *client.ReplyError
	if !errors.As(err, &re) {
		return err
	}
	if slices.Contains([]string{"ERR this server is not a member of a replicated group",
		"ERR This instance has cluster support disabled"}, re.Msg) {
		return ErrNotReplicated
	}
	return errors.New(re.Msg)
}
