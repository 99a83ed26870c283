package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/flintkv/flint/internal/clusterctl"
	"github.com/flintkv/flint/internal/shardmap"
	"github.com/flintkv/flint/internal/slot"
)

// moveSlotsCmd runs `flint cluster move-slots --addr MANAGERS --slots a-b --to GROUP`.
func moveSlotsCmd(args []string) int {
	fs := flag.NewFlagSet("cluster move-slots", flag.ContinueOnError)
	addr, pass, timeout := changeFlags(fs)
	slots := fs.String("slots", "", "the slots to move: first-last (both included), or one slot")
	to := fs.Uint64("to", 0, "the id of the group that is to own them")
	fs.Lookup("timeout").Usage = "stop waiting after this long (the managers go on with the move; run the command again to wait for it)"
	abort := fs.Bool("abort", false, "instead, have the managers give up the moves under way whose source still serves\ntheir slots (they finish the others), and wait for them")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: flint cluster move-slots --addr MANAGERS --slots first-last --to GROUP\n"+
			"       flint cluster move-slots --addr MANAGERS --abort\n\n"+
			"Moves the slots to the group while the cluster serves: their keys and the groups' client\n"+
			"sessions are copied, then the map gives the slots to the group. The command records the\n"+
			"move in the managers' map and waits; the managers take its steps, and finish it even if\n"+
			"this command is stopped (run again, it waits for the same move). Refused, with nothing\n"+
			"changed, while another move is under way. Prints the cluster's status once done.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if !parseFlags(fs, args) {
		return 2
	}
	if *abort {
		return runShardChange(*addr, *pass, *timeout, "move-slots", func(ctx context.Context, g *clusterctl.Group) (string, error) {
			aborted, err := g.AbortMoves(ctx)
			return fmt.Sprintf("%d moves given up", len(aborted)), err
		})
	}
	first, last, err := parseSlots(*slots)
	if err != nil || *to == 0 {
		fmt.Fprintf(os.Stderr, "flint cluster move-slots: want --slots first-last and --to GROUP (%v)\n", err)
		fs.Usage()
		return 2
	}
	return runShardChange(*addr, *pass, *timeout, "move-slots", func(ctx context.Context, g *clusterctl.Group) (string, error) {
		return fmt.Sprintf("slots %d-%d belong to group %d", first, last, *to), g.MoveSlots(ctx, first, last, *to)
	})
}

// addGroupCmd runs `flint cluster add-group --addr MANAGERS --group G
// --members 1=host:port,... [--from GROUP] [--hosted]`.
func addGroupCmd(args []string) int {
	fs := flag.NewFlagSet("cluster add-group", flag.ContinueOnError)
	addr, pass, timeout := changeFlags(fs)
	group := fs.Uint64("group", 0, "the new group's id (1 to 65535), which its members were started with (--shard-group)")
	members := fs.String("members", "", "the new group's members: id=host:port (client address), comma-separated")
	from := fs.Uint64("from", 0, "the group that gives it half of its slots (default: the one with the most)")
	hosted := fs.Bool("hosted", false, "the data nodes host several groups each (flint serve --host-groups): start the group on\n"+
		"the nodes of --members, each id a node's and each address its new member's client address")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: flint cluster add-group --addr MANAGERS --group G --members 1=host:port,... [--from GROUP] [--hosted]\n\n"+
			"Adds a data group, whose members run already (flint serve --shard-group G --managers ...),\n"+
			"or with --hosted is started on running nodes that host groups, to the cluster, and moves\n"+
			"to it half of another group's slots while the cluster serves: a split. Run again after a\n"+
			"failure, it resumes; run again once done (without --from), it says so and changes nothing.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if !parseFlags(fs, args) {
		return 2
	}
	ms, err := parseGroupMembers(*members)
	if err != nil || *group == 0 || *group > shardmap.MaxGroup {
		fmt.Fprintf(os.Stderr, "flint cluster add-group: want --group 1 to %d and --members id=host:port,... (%v)\n", shardmap.MaxGroup, err)
		fs.Usage()
		return 2
	}
	add := (*clusterctl.Group).AddGroup
	if *hosted {
		add = (*clusterctl.Group).AddHostedGroup
	}
	return runShardChange(*addr, *pass, *timeout, "add-group", func(ctx context.Context, g *clusterctl.Group) (string, error) {
		err := add(g, ctx, *group, ms, *from)
		if errors.Is(err, clusterctl.ErrSplitDone) {
			return strings.TrimPrefix(err.Error(), "clusterctl: ") + "; nothing changed (--from GROUP moves more of a group's slots to it)", nil
		}
		return fmt.Sprintf("group %d was added", *group), err
	})
}

// rebalanceCmd runs `flint cluster rebalance --addr MANAGERS`.
func rebalanceCmd(args []string) int {
	fs := flag.NewFlagSet("cluster rebalance", flag.ContinueOnError)
	addr, pass, timeout := changeFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: flint cluster rebalance --addr MANAGERS\n\n"+
			"Moves slots between the data groups while the cluster serves, until each owns as many\n"+
			"as the others, give or take one.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if !parseFlags(fs, args) {
		return 2
	}
	return runShardChange(*addr, *pass, *timeout, "rebalance", func(ctx context.Context, g *clusterctl.Group) (string, error) {
		n, err := g.Rebalance(ctx)
		return fmt.Sprintf("%d slots moved", n), err
	})
}

// changeFlags defines the flags every change of a sharded cluster takes.
func changeFlags(fs *flag.FlagSet) (addr, pass *string, timeout *time.Duration) {
	addr = fs.String("addr", "127.0.0.1:7379", "client addresses of the cluster's managers (host:port, comma-separated)")
	pass = fs.String("pass", "", "password to AUTH with (default: $FLINT_PASSWORD)")
	timeout = fs.Duration("timeout", 10*time.Minute, "give up after this long (run the command again to resume)")
	return addr, pass, timeout
}

// runShardChange runs change against the managers at addr, then prints
// what it says and the cluster's status; it returns the exit status.
func runShardChange(addr, pass string, timeout time.Duration, name string, change func(context.Context, *clusterctl.Group) (string, error)) int {
	addrs, err := splitAddrs(addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "flint cluster %s: --addr: %v\n", name, err)
		return 2
	}
	if pass == "" {
		pass = os.Getenv("FLINT_PASSWORD")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	g, err := clusterctl.Dial(clusterctl.Config{Addrs: addrs, Password: pass})
	var done string
	if err == nil {
		done, err = change(ctx, g)
	}
	if err == nil {
		var sh clusterctl.Shards
		if sh, err = g.ShardStatus(ctx); err == nil {
			fmt.Printf("%s\n\n", done)
			err = sh.Write(os.Stdout)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "flint cluster %s: %v\n", name, err)
		return 1
	}
	return 0
}

// parseGroupMembers parses id=host:port,...
func parseGroupMembers(s string) ([]shardmap.Member, error) {
	var ms []shardmap.Member
	for part := range strings.SplitSeq(s, ",") {
		id, addr, ok := strings.Cut(part, "=")
		n, err := strconv.ParseUint(id, 10, 64)
		if !ok || err != nil || n == 0 || addr == "" {
			return nil, fmt.Errorf("bad member %q: want id=host:port", part)
		}
		ms = append(ms, shardmap.Member{ID: n, Addr: addr})
	}
	return ms, nil
}

// parseSlots parses "first-last" or "slot".
func parseSlots(s string) (first, last int, err error) {
	a, b, dash := strings.Cut(s, "-")
	if first, err = strconv.Atoi(a); err == nil {
		last = first
		if dash {
			last, err = strconv.Atoi(b)
		}
	}
	if err != nil || first < 0 || first > last || last >= slot.Count {
		return 0, 0, fmt.Errorf("bad slots %q: want first-last, 0 <= first <= last <= %d", s, slot.Count-1)
	}
	return first, last, nil
}
