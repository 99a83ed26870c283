package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/flintkv/flint/internal/clusterctl"
)

// createCmd runs `flint cluster create --addr MANAGERS --servers
// host:port,... [--replicas R]`.
func createCmd(args []string) int {
	fs := flag.NewFlagSet("cluster create", flag.ContinueOnError)
	addr, pass, timeout := changeFlags(fs)
	servers := fs.String("servers", "", "the client addresses of every data group's members, group by group, as a manager's\nflint serve --servers: group g's member r (from 0) is the (g-1)*replicas+r-th")
	replicas := fs.Int("replicas", 1, "how many members each data group has")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: flint cluster create --addr MANAGERS --servers host:port,... [--replicas R]\n\n"+
			"Makes a new sharded cluster of processes running already: managers started with no map\n"+
			"(flint serve --manager, without --servers; --addr names them all) and the members of each\n"+
			"data group (flint serve --shard-group G --managers MANAGERS). Checks that each is up, is\n"+
			"what it is named as and belongs to no cluster yet, and that the managers are every member\n"+
			"of one meta group, then writes the map of epoch 1, with\n"+
			"the slots split evenly among the groups in order, and waits until every process named\n"+
			"has learned it. A cluster that has a map already is refused, and so is a second create\n"+
			"run at the same time.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if !parseFlags(fs, args) {
		return 2
	}
	groups, err := groupsOf(splitList(*servers), *replicas)
	if err != nil {
		fmt.Fprintf(os.Stderr, "flint cluster create: %v\n", err)
		fs.Usage()
		return 2
	}
	return runShardChange(*addr, *pass, *timeout, "create", func(ctx context.Context, g *clusterctl.Group) (string, error) {
		m, err := g.Create(ctx, groups)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("the cluster of %d data groups was created: every node has its map", len(m.Groups)), nil
	})
}
