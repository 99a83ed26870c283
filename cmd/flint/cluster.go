package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/flintkv/flint/internal/clusterctl"
	"github.com/flintkv/flint/internal/localcluster"
	"github.com/flintkv/flint/internal/node"
)

const clusterUsage = `usage: flint cluster <command> [flags] [arguments]

commands:
  up                            run a replicated group on this machine, each member a flint serve process,
                                or a sharded cluster of such groups (--groups), or of groups that
                                --nodes processes host (--groups --hosted)
  status                        show each member: role, voter, match index and lag at the leader,
                                and its own term, commit and applied indexes
  add <id> <host:port@peerport> add a new member, started with flint serve --join: as a learner,
                                caught up by the leader, then as a voter
  remove <id>                   remove a member, which stops serving (a leader hands over first)
  transfer <id>                 make a voter the leader
  create --servers host:port,... [--replicas R]
                                make a sharded cluster of managers and data nodes started
                                without a map: write its first map, the slots split evenly
  move-slots --slots a-b --to G move slots to data group G of a sharded cluster while it serves
  add-group --group G --members 1=host:port,... [--hosted]
                                add a data group, running already (or, --hosted, started on the
                                running nodes named), and move half of a group's slots to it (a split)
  rebalance                     move slots until every data group owns as many as the others
  add-node --group G --id N --node host:port@peerport
                                add a node, running already (flint serve --join), to data group G,
                                and to the cluster map
  remove-node --node host:port  remove a node from its data group (a leader hands over first),
                                and from the cluster map
                                (create, move-slots, add-group, rebalance, add-node and
                                remove-node take the managers as --addr)

status, add, remove and transfer reach the group through any of its members
(--addr), and find its leader themselves. Run 'flint cluster <command> --help'
for a command's flags.
`

// clusterCmd runs `flint cluster`.
func clusterCmd(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, clusterUsage)
		return 2
	}
	switch args[0] {
	case "up":
		return clusterUpCmd(args[1:])
	case "status", "add", "remove", "transfer":
		return clusterAdmin(args[0], args[1:])
	case "create":
		return createCmd(args[1:])
	case "move-slots":
		return moveSlotsCmd(args[1:])
	case "add-group":
		return addGroupCmd(args[1:])
	case "rebalance":
		return rebalanceCmd(args[1:])
	case "add-node":
		return addNodeCmd(args[1:])
	case "remove-node":
		return removeNodeCmd(args[1:])
	case "help", "-h", "--help":
		fmt.Fprint(os.Stderr, clusterUsage)
		return 2
	}
	fmt.Fprintf(os.Stderr, "flint cluster: unknown command %q\n\n%s", args[0], clusterUsage)
	return 2
}

// clusterUpCmd runs `flint cluster up`.
func clusterUpCmd(args []string) int {
	fs := flag.NewFlagSet("cluster up", flag.ContinueOnError)
	nodes := fs.Int("nodes", 3, "members of a new cluster (of each of its groups): 1, 3, 5, 7 or 9 (a directory made\nbefore keeps its own)")
	groups := fs.Int("groups", 0, "make a new sharded cluster of this many data groups of --nodes members each, every\nmember its own process, and a manager; 0: one group, not sharded")
	dir := fs.String("dir", "./cluster", "the cluster's directory: cluster.json, and each member's data and log")
	fsync := fs.String("fsync", "always", "each member's --fsync")
	hosted := fs.Bool("hosted", false, "with --groups: run the data groups on --nodes processes (nodes), each hosting its members of\nseveral groups on one log, every member on its own client port, rather than a process per member")
	managers := fs.Int("managers", 0, "with --groups: the managers of a new sharded cluster, a meta group that keeps the cluster map\nin its log: 1, 3, 5, 7 or 9 (default 1; a directory made before keeps its own)")
	rf := fs.Int("rf", 0, "with --hosted: the members of each data group, spread evenly over the nodes (default min(3, --nodes))")
	snapEntries := fs.Uint64("snapshot-entries", 0, "each member's --snapshot-entries (default: flint serve's)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: flint cluster up [flags]\n\nStarts a replicated group on loopback, each member a flint serve process, or with\n--groups a sharded cluster of such groups and its managers; with --hosted as well, --nodes\nprocesses host the groups' members, --rf to a group. Prints each process's client\naddress, and stops them on Ctrl-C. Run again on the same --dir, it starts the same\ncluster again, with the map the managers keep (slots moved, groups added since).\n\nflags:\n")
		fs.PrintDefaults()
	}
	if !parseFlags(fs, args) {
		return 2
	}
	if (*hosted || *managers != 0) && *groups < 1 || *rf != 0 && !*hosted {
		fmt.Fprintln(os.Stderr, "flint cluster up: --hosted and --managers need --groups, and --rf needs --hosted")
		return 2
	}
	bin, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "flint cluster up: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	serveArgs := []string{"--fsync", *fsync}
	if *snapEntries > 0 {
		serveArgs = append(serveArgs, "--snapshot-entries", fmt.Sprint(*snapEntries))
	}
	err = localcluster.Up(ctx, localcluster.Config{Bin: bin, Dir: *dir, Nodes: *nodes, Groups: *groups, Managers: *managers, Password: os.Getenv("FLINT_PASSWORD"), Stdout: os.Stdout, Hosted: *hosted, RF: *rf,
		Args: serveArgs})
	if err != nil {
		fmt.Fprintf(os.Stderr, "flint cluster up: %v\n", err)
		return 1
	}
	return 0
}

// clusterArgs is what each admin command takes after its name: its
// arguments' names, and what it says it does.
var clusterArgs = map[string]struct{ args, about string }{
	"status": {"", "Shows the group's members: each one's role, whether it votes, its match index and\n" +
		"lag as the leader knows them, and its own term, commit and applied indexes. Given a\n" +
		"manager of a sharded cluster, shows every group: its slots, and its members' state."},
	"add": {"<id> <host:port@peerport>", "Adds a new member, which must be running (flint serve --join, with the same\n" +
		"addresses): as a learner, which the leader catches up, then as a voter. host:port\n" +
		"is where its clients connect, peerport (or peerhost:peerport) where its peers do.\n" +
		"A member id is never reused: a node whose data directory was lost joins with a new one."},
	"remove": {"<id>", "Removes a member from the group; it stops serving. A leader hands leadership to\n" +
		"the most up-to-date other voter first."},
	"transfer": {"<id>", "Hands the group's leadership to a voter, and returns once it leads."},
}

// clusterAdmin runs `flint cluster status|add|remove|transfer`.
func clusterAdmin(name string, args []string) int {
	spec := clusterArgs[name]
	fs := flag.NewFlagSet("cluster "+name, flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:7379", "client addresses of any of the group's members (host:port, comma-separated)")
	pass := fs.String("pass", "", "password to AUTH with (default: $FLINT_PASSWORD)")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this long (an add waits for the new member to catch up)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: flint cluster %s [flags] %s\n\n%s\n\nflags:\n", name, spec.args, spec.about)
		fs.PrintDefaults()
	}
	pos, ok := parseInterspersed(fs, args)
	if !ok {
		return 2
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "flint cluster %s: %s\n", name, fmt.Sprintf(format, a...))
		fmt.Fprintf(os.Stderr, "usage: flint cluster %s [flags] %s (more: flint cluster %s --help)\n", name, spec.args, name)
		return 2
	}
	var err error
	want := map[string]int{"status": 0, "add": 2, "remove": 1, "transfer": 1}[name]
	if len(pos) != want {
		return usageErr("want %d arguments, got %d", want, len(pos))
	}
	var id uint64
	if want > 0 {
		if id, err = strconv.ParseUint(pos[0], 10, 64); err != nil || id == 0 {
			return usageErr("bad member id %q: want a positive integer", pos[0])
		}
	}
	if name == "add" {
		if _, err := node.ParseMembers(fmt.Sprintf("%d=%s", id, pos[1])); err != nil {
			return usageErr("bad member address %q (want host:port@peerport): %v", pos[1], err)
		}
	}
	addrs, err := splitAddrs(*addr)
	if err != nil {
		return usageErr("--addr: %v", err)
	}
	if *timeout <= 0 {
		return usageErr("--timeout must be positive")
	}
	if *pass == "" {
		*pass = os.Getenv("FLINT_PASSWORD")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := runAdmin(ctx, name, clusterctl.Config{Addrs: addrs, Password: *pass}, id, pos); err != nil {
		fmt.Fprintf(os.Stderr, "flint cluster %s: %v\n", name, err)
		return 1
	}
	return 0
}

// runAdmin does one admin command, then prints the group's status.
func runAdmin(ctx context.Context, name string, cfg clusterctl.Config, id uint64, pos []string) error {
	g, err := clusterctl.Dial(cfg)
	if err != nil {
		return err
	}
	defer g.Close()
	switch name {
	case "add":
		if err := g.Add(ctx, id, pos[1]); err != nil {
			return err
		}
		fmt.Printf("member %d (%s) was added, and votes\n\n", id, pos[1])
	case "remove":
		moved, err := g.Remove(ctx, id)
		if moved != 0 {
			fmt.Printf("member %d led: leadership moved to member %d first\n", id, moved)
		}
		if err != nil {
			return err
		}
		fmt.Printf("member %d was removed: it stops serving\n\n", id)
	case "transfer":
		if err := g.Transfer(ctx, id); err != nil {
			return err
		}
		fmt.Printf("member %d leads now\n\n", id)
	}
	if name == "status" {
		sh, err := g.ShardStatus(ctx)
		if err == nil {
			return sh.Write(os.Stdout)
		}
		if !errors.Is(err, clusterctl.ErrNotManager) {
			return err
		}
	}
	st, err := g.Status(ctx)
	if err != nil {
		if errors.Is(err, clusterctl.ErrNotReplicated) {
			return fmt.Errorf("%w (%s)", err, cfg.Addrs[0])
		}
		return err
	}
	return st.Write(os.Stdout)
}
