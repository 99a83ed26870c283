package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/flintkv/flint/internal/check"
)

// checkCmd runs `flint check`. Its exit status is 0 for PASS, 1 for FAIL
// or a run that went wrong, 2 for bad usage and 3 for UNKNOWN (the search
// ran out of time).
func checkCmd(args []string) int {
	var cfg check.Config
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.BoolVar(&cfg.Spawn, "spawn", false, "start flint serve from this binary on a free port and a fresh data directory (needed for --nemesis)")
	fs.IntVar(&cfg.Nodes, "nodes", 0, "with --spawn, start a replicated group of this many members (1, 3, 5, 7 or 9), their peer\ntraffic through proxies the checker controls (0: one server, not replicated); with --hosted,\nthe nodes that host the groups (1 to 9)")
	fs.IntVar(&cfg.Groups, "groups", 0, "with --spawn, start a sharded cluster of this many data groups (1 to 16; 1 to 256 with --hosted) and its managers:\neach group --nodes members, or one data node, not replicated, without --nodes; the clients\nroute by slot, each fault strikes one group (0: not sharded)")
	fs.BoolVar(&cfg.Hosted, "hosted", false, "with --groups, host the data groups on --nodes processes instead, as flint cluster up --hosted:\neach node hosts its members of the groups on one log, group g's --rf members on nodes g, g+1, ...;\nfaults strike nodes (all their members at once); move-slots, split, membership and wipe\na random group (membership and wipe start new nodes that join it, at most 2 a run)")
	fs.IntVar(&cfg.Managers, "managers", 0, "with --groups, the managers: a meta group of 1, 3 or 5 flint serve --manager processes\nthat log the map on their disks (0: 1)")
	fs.IntVar(&cfg.RF, "rf", 0, "with --hosted, the members of each group: odd, at most --nodes (0: min(3, --nodes))")
	fs.IntVar(&cfg.Readers, "readers", 0, "with --nodes, clients that only read (GET), each from one member with READONLY: follower\nreads, linearizable through the read index")
	fs.BoolVar(&cfg.Sessions, "sessions", false, "the clients write in sessions, as Flint's client can: a write whose outcome they did not\nlearn is sent again, and must take effect once")
	fs.StringVar(&cfg.Addr, "addr", "", "server to check (host:port), unless --spawn")
	spawnArgs := fs.String("spawn-args", "", "more flags for the spawned server, space-separated")
	fs.IntVar(&cfg.Clients, "clients", check.DefaultClients, "concurrent clients, each one operation at a time")
	fs.IntVar(&cfg.Keys, "keys", check.DefaultKeys, "keys per client, or shared by all with --conflict (each group of up to 8 also gets a counter for INCR)")
	fs.BoolVar(&cfg.Conflict, "conflict", false, "all clients share one key set (default: each has its own)")
	fs.DurationVar(&cfg.Duration, "duration", check.DefaultDuration, "how long the workload runs (no limit if --ops is given without it)")
	fs.IntVar(&cfg.Ops, "ops", 0, "operations to record in all (0: no limit)")
	mix := fs.String("mix", check.DefaultMix, "weights of the commands: get,set,swap,cas,del,incr,mset,mget,range,multi (a transaction; multi=0 leaves them out),\nexpire,persist,ttl (EXPIRE k 1000000, PERSIST k, TTL k); or seeds ("+check.SeedsMix+")")
	fs.DurationVar(&cfg.OpTimeout, "op-timeout", check.DefaultOpTimeout, "an operation without a reply by then has an unknown outcome")
	nemesis := fs.String("nemesis", "none", "faults to inject, comma-separated: none, kill (kill -9 and restart), pause (SIGSTOP/SIGCONT);\nwith --nodes 3 or more also kill-leader, partition (halves, the leader alone, a bridge,\none-way), membership (remove a member, add a new one), wipe (a member loses its data and\nrejoins as a new member); with --groups 2 or more also move-slots (a random range of slots moves\nto a random group, online) and split (a new group takes half of a group's slots, online); with\n--groups also kill-manager (kill -9 of the managers' leader, and restart; with move-slots or\nsplit, also in the middle of half their moves)")
	fs.DurationVar(&cfg.NemesisInterval, "nemesis-interval", check.DefaultNemesisInterval, "average time between faults")
	fs.Uint64Var(&cfg.Seed, "seed", 0, "seed of the workload and the nemesis (0: a random one, printed)")
	fs.DurationVar(&cfg.CheckTimeout, "check-timeout", check.DefaultCheckTimeout, "time limit of the linearizability search; past it the result is UNKNOWN")
	fs.StringVar(&cfg.Out, "out", "", "directory for history.json, the server's log and data, and the visualizations of failures")
	recheck := fs.String("recheck", "", "check the history in this file (a history.json) again instead of running")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: flint check [flags]\n\n"+
			"Runs concurrent clients against a server, records every operation, and checks the history\n"+
			"for linearizability violations and lost writes. Exit status: 0 PASS, 1 FAIL or error,\n"+
			"2 bad usage, 3 UNKNOWN (the search ran out of time). See docs/TESTING.md.\n\n"+
			"examples:\n  flint check --spawn --conflict --nemesis kill,pause --duration 20s --out check-out\n"+
			"  flint check --spawn --nodes 3 --conflict --nemesis partition,kill-leader --duration 30s\n"+
			"  flint check --spawn --groups 3 --nodes 3 --sessions --nemesis kill-leader,partition --duration 30s\n"+
			"  flint check --spawn --hosted --nodes 3 --groups 6 --sessions --nemesis kill,partition,move-slots --duration 30s\n"+
			"  flint check --spawn --groups 3 --managers 3 --sessions --nemesis kill-manager,move-slots,split --duration 30s\n"+
			"  flint check --addr 127.0.0.1:7379 --clients 3\n  flint check --recheck check-out/history.json --out recheck-out\n\nflags:\n")
		fs.PrintDefaults()
	}
	if !parseFlags(fs, args) {
		return 2
	}
	var err error
	if cfg.Mix, err = check.ParseMix(*mix); err == nil {
		cfg.Nemesis, err = check.ParseNemesis(*nemesis)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "flint check: %v\n", err)
		return 2
	}
	if cfg.Ops > 0 && !flagSet(fs, "duration") {
		cfg.Duration = 0
	}
	cfg.ServeArgs = strings.Fields(*spawnArgs)
	cfg.Command = commandLine(append([]string{"flint", "check"}, args...))
	cfg.Stdout, cfg.Log = os.Stdout, os.Stderr
	// The first interrupt ends the workload early; the history so far is
	// still checked. A second one kills the checker.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); stop() }()
	var res *check.Result
	if *recheck != "" {
		res, err = check.Recheck(*recheck, cfg)
	} else {
		res, err = check.Run(ctx, cfg)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "flint check: %v\n", err)
		if errors.Is(err, check.ErrConfig) {
			return 2
		}
		return 1
	}
	switch {
	case res.Err != nil || res.Verdict == check.Fail:
		return 1
	case res.Verdict == check.Unknown:
		return 3
	}
	return 0
}
