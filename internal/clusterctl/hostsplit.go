package clusterctl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/flintkv/flint/client"
	"github.com/flintkv/flint/internal/ask"
	"github.com/flintkv/flint/internal/backoff"
	"github.com/flintkv/flint/internal/shardmap"
)

// groupRuns ends the error of FLINT.GROUP START at a node that runs the
// group already with the members asked for (node.ErrGroupRuns).
const groupRuns = "runs on this node already, with these members"

// AddHostedGroup adds data group id to a cluster whose data nodes host
// several groups each (flint serve --host-groups): each member's id is a
// node's, and its address the client address its member of the new group
// is to have on that node. It starts the group on each of those nodes
// (FLINT.GROUP START, at the client address of a member they host in the
// map), then adds it to the map and moves half of group from's slots to it
// as AddGroup does. It refuses, starting nothing, a group id the map has
// with other members, a group from the map does not have, a node that
// hosts no member in the map, fewer members than the group whose slots
// it takes has, and, as MoveSlots does, a split while the map lists a
// move to another group. A node that cannot be reached (restarting) is
// asked again until ctx ends. Called again with the same arguments after
// a failure, it resumes: a node that runs the group with these members
// already is passed over. Called again once the split
// is done, with from 0, it changes nothing and returns ErrSplitDone.
func (g *Group) AddHostedGroup(ctx context.Context, id uint64, members []shardmap.Member, from uint64) error {
	sh, err := g.splitMay(ctx, id, members, from)
	if err != nil {
		return err
	}
	src := sh.Map.Group(from)
	switch {
	case from == 0:
		src = largest(sh.Map, id)
	case src == nil || from == id:
		return fmt.Errorf("clusterctl: no group %d to take slots from", from)
	}
	if src != nil && len(members) < len(src.Members) {
		return fmt.Errorf("clusterctl: group %d would have %d members, fewer than the %d of group %d, whose slots it takes: name as many nodes",
			id, len(members), len(src.Members), src.ID)
	}
	nodes := make([]string, len(members))
	for i, m := range members {
		if nodes[i] = nodeAddr(sh, m.ID); nodes[i] == "" {
			return fmt.Errorf("clusterctl: node %d hosts no member of the cluster's groups: no such node", m.ID)
		}
	}
	args := []string{"FLINT.GROUP", "START", fmt.Sprint(id)}
	for _, m := range members {
		args = append(args, fmt.Sprintf("%d=%s", m.ID, m.Addr))
	}
	var started []string
	for i, m := range members {
		if err := g.startGroup(ctx, nodes[i], args); err != nil {
			msg := "none started it"
			if len(started) > 0 {
				msg = "it runs on nodes " + strings.Join(started, ", ") + " (run the command again, with the same members, once fixed)"
			}
			return fmt.Errorf("clusterctl: node %d (at %s) did not start group %d: %w; %s", m.ID, nodes[i], id, replyErr(err), msg)
		}
		started = append(started, fmt.Sprint(m.ID))
	}
	return g.AddGroup(ctx, id, members, from)
}

// startGroup sends FLINT.GROUP START, args, to the node at addr, again
// while the node cannot be reached (it may be restarting), until ctx
// ends. A node that runs the group with these members already has started
// it: the command is idempotent, so a send whose outcome is unknown may go
// again.
func (g *Group) startGroup(ctx context.Context, addr string, args []string) error {
	for wait := backoff.New(backoff.DefaultMin, 500*time.Millisecond); ; {
		_, err := ask.Wait(ctx, addr, g.cfg.Password, args...)
		re := new(client.ReplyError)
		switch {
		case errors.As(err, &re) && strings.HasSuffix(re.Msg, groupRuns):
			return nil
		case err == nil || errors.As(err, &re):
			return err
		}
		if wait.Wait(ctx) != nil {
			return err
		}
	}
}

// nodeAddr returns the client address of a member that node id hosts in
// sh's map, one that answered the managers if any did, or "".
func nodeAddr(sh Shards, id uint64) string {
	addr := ""
	for _, gr := range sh.Map.Groups {
		for _, m := range gr.Members {
			switch {
			case m.ID != id:
			case !sh.Down[shardmap.MemberKey{Group: gr.ID, Member: m.ID}]:
				return m.Addr
			case addr == "":
				addr = m.Addr
			}
		}
	}
	return addr
}
