// Package clusterctl operates a running replicated group from outside, as
// `flint cluster add|remove|transfer|status` does: it finds the group's
// leader from any members' client addresses, sends it the admin command
// FLINT.MEMBER ADD|REMOVE|TRANSFER, and reports the members' state from
// what each serves (INFO replication, CLUSTER NODES). It speaks only the
// client protocol, to each member itself (package ask), not through a
// client that routes commands by slot: in a sharded cluster that would
// take a command without keys to the group that serves slot 0, whichever
// group the addresses given are members of.
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
)

// Config says how to reach a group.
type Config struct {
	Addrs    []string // client addresses (host:port) of one or more members
	Password string   // AUTH password, if the members require one
}

// Group is a replicated group, reached through its members' addresses.
type Group struct {
	cfg Config
}

// ErrNotReplicated says that the server is not a member of a replicated
// group: a single node has no members to change.
var ErrNotReplicated = errors.New("clusterctl: the server at that address is not a member of a replicated group")

// Dial returns the group of cfg.Addrs. It connects to none of them: each
// method asks the members it needs.
func Dial(cfg Config) (*Group, error) {
	if len(cfg.Addrs) == 0 {
		return nil, errors.New("clusterctl: no member address")
	}
	return &Group{cfg: cfg}, nil
}

// Close releases the group; it holds no connection between calls.
func (g *Group) Close() error { return nil }

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

// member sends FLINT.MEMBER sub id args... to the leader, found anew
// before each try; while the group has no leader, or the one found no
// longer leads, it tries again after a backoff, until ctx ends.
func (g *Group) member(ctx context.Context, sub string, id uint64, args ...string) error {
	cmd := append([]string{"FLINT.MEMBER", sub, strconv.FormatUint(id, 10)}, args...)
	wait := backoff.Default()
	for {
		lead, err := g.leader(ctx)
		if err == nil {
			_, err = ask.Wait(ctx, lead, g.cfg.Password, cmd...)
			if !retryable(err) {
				return replyErr(err)
			}
		} else if errors.Is(err, ErrNotReplicated) {
			return err
		}
		if werr := wait.Wait(ctx); werr != nil {
			return fmt.Errorf("clusterctl: %w (last: %v)", werr, err)
		}
	}
}

// leader returns the client address of the member that leads (see
// leaderOrAny), or an error if none does now.
func (g *Group) leader(ctx context.Context) (string, error) {
	addr, info, err := g.leaderOrAny(ctx)
	if err != nil {
		return "", err
	}
	if info["role"] != "master" {
		return "", errors.New("clusterctl: the group has no leader now")
	}
	return addr, nil
}

// retryable reports whether a reply to FLINT.MEMBER says to try again at
// the leader: the member asked no longer leads, or knows no leader, or
// could not be reached.
func retryable(err error) bool {
	var re *client.ReplyError
	if !errors.As(err, &re) {
		return err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
	}
	return slices.ContainsFunc([]string{"MOVED ", "CLUSTERDOWN ", "TRYAGAIN ", "READONLY "}, func(p string) bool {
		return strings.HasPrefix(re.Msg, p)
	})
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
