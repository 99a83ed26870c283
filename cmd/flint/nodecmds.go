package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/flintkv/flint/internal/clusterctl"
	"github.com/flintkv/flint/internal/node"
	"github.com/flintkv/flint/internal/shardmap"
)

// addNodeCmd runs `flint cluster add-node --addr MANAGERS --group G --id N
// --node host:port@peerport`.
func addNodeCmd(args []string) int {
	fs := flag.NewFlagSet("cluster add-node", flag.ContinueOnError)
	addr, pass, timeout := changeFlags(fs)
	group := fs.Uint64("group", 0, "the data group the node joins")
	id := fs.Uint64("id", 0, "the node's member id in its group, new to the group (its flint serve --id)")
	at := fs.String("node", "", "the node's addresses: host:port@peerport, where its clients and its peers connect\n(its flint serve --join)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: flint cluster add-node --addr MANAGERS --group G --id N --node host:port@peerport\n\n"+
			"Adds a node, running already (flint serve --shard-group G --managers ... --id N\n"+
			"--initial-members <the group's> --join host:port@peerport), to data group G: as a\n"+
			"learner, caught up by the group's leader, then as a voter; then to the cluster map,\n"+
			"which CLUSTER SLOTS and NODES show. Run again after a failure, it resumes.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if !parseFlags(fs, args) {
		return 2
	}
	_, err := node.ParseMembers(fmt.Sprintf("%d=%s", *id, *at))
	if err != nil || *id == 0 || *group == 0 || *group > shardmap.MaxGroup {
		fmt.Fprintf(os.Stderr, "flint cluster add-node: want --group 1 to %d, --id N > 0 and --node host:port@peerport (%v)\n", shardmap.MaxGroup, err)
		fs.Usage()
		return 2
	}
	return runShardChange(*addr, *pass, *timeout, "add-node", func(ctx context.Context, g *clusterctl.Group) (string, error) {
		return fmt.Sprintf("member %d (%s) was added to group %d, and votes", *id, *at, *group), g.AddNode(ctx, *group, *id, *at)
	})
}

// removeNodeCmd runs `flint cluster remove-node --addr MANAGERS --node
// host:port`, or with --group G, --node ID.
func removeNodeCmd(args []string) int {
	fs := flag.NewFlagSet("cluster remove-node", flag.ContinueOnError)
	addr, pass, timeout := changeFlags(fs)
	group := fs.Uint64("group", 0, "the node's data group, to name it by its member id")
	at := fs.String("node", "", "the node: its client address (host:port), or with --group its member id")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: flint cluster remove-node --addr MANAGERS --node host:port\n"+
			"       flint cluster remove-node --addr MANAGERS --group G --node ID\n\n"+
			"Removes a node from its data group (a leader hands leadership to the most up-to-date\n"+
			"other voter first), and it stops serving; then from the cluster map. A group's last\n"+
			"member is not removed. Run again after a failure, it resumes.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if !parseFlags(fs, args) {
		return 2
	}
	if *at == "" || *group > shardmap.MaxGroup {
		fmt.Fprintf(os.Stderr, "flint cluster remove-node: want --node host:port, or --group 1 to %d and --node ID\n", shardmap.MaxGroup)
		fs.Usage()
		return 2
	}
	return runShardChange(*addr, *pass, *timeout, "remove-node", func(ctx context.Context, g *clusterctl.Group) (string, error) {
		key, moved, err := g.RemoveNode(ctx, *group, *at)
		done := fmt.Sprintf("member %d was removed from group %d: it stops serving", key.Member, key.Group)
		if moved != 0 {
			done = fmt.Sprintf("member %d of group %d led: leadership moved to member %d first\n%s", key.Member, key.Group, moved, done)
		}
		return done, err
	})
}
