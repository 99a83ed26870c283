package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/flintkv/flint/internal/bench"
)

// benchCmd runs `flint bench`.
func benchCmd(args []string) int {
	var cfg bench.Config
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&cfg.Target, "target", "", "server to drive: flint://host:port, redis://host:port (a password as flint://:pw@host:port) or null (the driver alone)")
	fs.BoolVar(&cfg.Spawn, "spawn", false, "start `flint serve` from this binary on a free 127.0.0.1 port as the target, and stop it after")
	spawnArgs := fs.String("spawn-args", "", "more flags for the spawned server, space-separated")
	fs.IntVar(&cfg.ServerPID, "server-pid", 0, "pid of the --target server, to report its CPU time and memory")
	fs.StringVar(&cfg.Compare, "compare", "", "second target (same forms as --target), run alternately with the first: A B A B ...")
	fs.IntVar(&cfg.ComparePID, "compare-pid", 0, "pid of the --compare server")
	fs.IntVar(&cfg.Pairs, "pairs", bench.DefaultPairs, "A B pairs with --compare, at least 3")
	fs.StringVar(&cfg.Workload, "workload", "cs6450-b", "cs6450-a|b|c, ycsb-a .. ycsb-f, tx-5 (MULTI, 5 SETs, EXEC) or sets-5 (the 5 SETs alone)")
	fs.StringVar(&cfg.Distribution, "distribution", "", "request distribution: zipfian (unscrambled), scrambled, uniform or latest (default: the workload's)")
	fs.Float64Var(&cfg.Theta, "theta", bench.DefaultTheta, "zipfian constant")
	fs.IntVar(&cfg.Records, "records", 0, "records loaded before the run (default: the workload's: 1000000 for cs6450, 100000 for ycsb)")
	fs.IntVar(&cfg.ValueSize, "value-size", 0, "value length in bytes (default: 128 for cs6450, 1000 for ycsb)")
	fs.IntVar(&cfg.ScanLength, "scan-length", bench.DefaultScanLength, "longest scan; each scan's length is uniform in [1, this]")
	fs.DurationVar(&cfg.Duration, "duration", 10*time.Second, "measured run time (default 10s, or none if --ops is given)")
	fs.Int64Var(&cfg.Ops, "ops", 0, "measured operations, split among the workers (0: no limit)")
	fs.DurationVar(&cfg.Warmup, "warmup", 0, "run this long before measuring")
	fs.IntVar(&cfg.Workers, "workers", bench.DefaultWorkers, "worker goroutines, each with its own generator, running its operations in order")
	fs.IntVar(&cfg.Pipeline, "pipeline", bench.DefaultPipeline, "operations in flight per worker, sent as one batch")
	fs.IntVar(&cfg.Conns, "conns", bench.DefaultConns, "client connections per target, shared by the workers")
	fs.Float64Var(&cfg.Rate, "rate", 0, "open loop: total intended operations per second, latency counted from when each was due (0: closed loop)")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of the generators; worker i draws from (seed, i)")
	fs.StringVar(&cfg.Sweep, "sweep", "", "one run per value: workers=1,2,4,8 | pipeline=1,8,64 | conns=... | value-size=512,4096,... | rate=...")
	fs.StringVar(&cfg.Out, "out", "", "directory for result.json, bench.txt (for benchstat) and the plots; nothing is written without it.\nIn the repository use results/NAME, which git ignores")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the driver to this file")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: flint bench [flags]\n\nRuns a YCSB or cs6450 workload against a server and reports throughput and latency.\n\n"+
			"examples:\n  flint bench --spawn --workload cs6450-b --duration 10s --out results/cs6450-b\n"+
			"  flint bench --spawn --compare redis://127.0.0.1:6379 --compare-pid $(pidof redis-server)\n"+
			"  flint bench --target null --workers 2 --pipeline 64\n\nflags:\n")
		fs.PrintDefaults()
	}
	if !parseFlags(fs, args) {
		return 2
	}
	if cfg.Ops > 0 && !flagSet(fs, "duration") {
		cfg.Duration = 0
	}
	cfg.SpawnArgs = strings.Fields(*spawnArgs)
	cfg.Command = commandLine(append([]string{"flint", "bench"}, args...))
	cfg.Stdout, cfg.Progress = os.Stdout, os.Stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "flint bench: --cpuprofile: %v\n", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	if _, err := bench.Run(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "flint bench: %v\n", err)
		if errors.Is(err, bench.ErrConfig) {
			return 2
		}
		return 1
	}
	return 0
}

// flagSet reports whether the flag name was given.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// commandLine joins args, quoting those a shell would split.
func commandLine(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = a
		if a == "" || strings.ContainsAny(a, " \t\n'\"$\\") {
			q[i] = strconv.Quote(a)
		}
	}
	return strings.Join(q, " ")
}
