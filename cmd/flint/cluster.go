package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/flintkv/flint/internal/localcluster"
)

// clusterCmd runs `flint cluster`.
func clusterCmd(args []string) int {
	if len(args) == 0 || args[0] != "up" {
		fmt.Fprint(os.Stderr, "usage: flint cluster up [flags]\n\n  up    run a replicated group on this machine, each member a flint serve process\n")
		return 2
	}
	fs := flag.NewFlagSet("cluster up", flag.ContinueOnError)
	nodes := fs.Int("nodes", 3, "members of a new cluster: 1, 3, 5, 7 or 9 (a directory made before keeps its own)")
	dir := fs.String("dir", "./cluster", "the cluster's directory: cluster.json, and each member's data and log")
	fsync := fs.String("fsync", "always", "each member's --fsync")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: flint cluster up [flags]\n\nStarts a replicated group on loopback, each member a flint serve process, prints\neach member's client address, and stops them on Ctrl-C. Run again on the same\n--dir, it starts the same group again.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if !parseFlags(fs, args[1:]) {
		return 2
	}
	bin, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "flint cluster up: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = localcluster.Up(ctx, localcluster.Config{Bin: bin, Dir: *dir, Nodes: *nodes, Stdout: os.Stdout,
		Args: []string{"--fsync", *fsync}})
	if err != nil {
		fmt.Fprintf(os.Stderr, "flint cluster up: %v\n", err)
		return 1
	}
	return 0
}
