// Command replbench measures a replicated group of `flint serve` processes
// on this machine, beside a single node, for docs/PERFORMANCE.md's
// "Replication" section. Every process it starts runs in a fresh temporary
// directory and is stopped before it exits; its members get the flags
// `flint cluster up` gives them (plus -serve-args, given to the single
// node too). Each run prints the 1-minute load average before and after it.
//
// A group against a single node with redis-benchmark: each pair starts a
// fresh group and a fresh single node, the group first in odd pairs and
// second in even ones, and runs redis-benchmark against the group's leader
// and the single node in turn; it prints throughput, p50 and p99, the CPU
// time of all the group's members per operation (and the leader's alone),
// and each member's peak resident memory (VmHWM):
//
//	go run ./scripts/replbench -pairs 5 -out results/repl/set -- -P 64 -c 50 -t set -r 1000000 -n 2000000
//
// The same with flint bench: one group and one single node, alternated by
// `flint bench --target redis://LEADER --compare redis://SINGLE` with the
// arguments given after "bench"; replbench adds the whole group's CPU per
// operation, read from its own samples over each run's measured time:
//
//	go run ./scripts/replbench -out results/repl/cs6450-b -- bench --workload cs6450-b --pairs 5 --duration 10s
//
// Catch-up: a fresh group of 3; one follower is stopped, -behind bytes of
// values are written (redis-benchmark, -value-size bytes each), a steady
// load starts (pipelined GETs and SETs of 128 bytes, -reads of them GETs,
// on -keyspace keys), and the follower is restarted -before into it. It
// prints the time from the restart until the follower's match index (the
// leader's INFO replication) reaches the leader's commit index at the
// restart, and until it is no further behind than the other follower; the
// load's throughput and p99 before, during and after; and the snapshot
// lines of the leader's and the follower's logs. It samples the members'
// memory (anonymous and file-backed RSS, and the Go heap from INFO memory)
// over the load's last 10 s before the restart, during the catch-up and
// after it, and with -pprof-base saves their heap profiles to -out at the
// end of the first and the last, and every 2 s during the catch-up:
//
//	go run ./scripts/replbench -catchup -behind 1073741824 -out results/repl/catchup
//
// Against etcd: for each of YCSB's workloads A and B, a fresh Flint group
// of 3 and a fresh etcd group of 3 (Debian's etcd-server, its default
// settings), both loaded with -records records and then run alternately by
// go-ycsb with the same -threads at each group's leader (the redis binding
// with redis.mode=single and redis.datatype=string, the etcd binding with
// linearizable reads); -flint-ops and -etcd-ops operations a run, so that
// the runs last about as long. -systems adds a single Flint node (flint1)
// to the rotation. It prints throughput, p99 per operation, every member's
// CPU per operation and go-ycsb's own. go-ycsb v1.0.3 builds from its
// module's source (`go install` refuses its replace directives); see
// docs/PERFORMANCE.md:
//
//	go run ./scripts/replbench -ycsb a,b -systems flint,etcd,flint1 -ycsb-bin /path/to/go-ycsb -pairs 3 -out results/repl/ycsb
//
// redis-benchmark, and for -ycsb etcd and etcdctl, must be on PATH; `make
// build` makes bin/flint.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

func main() {
	bin := flag.String("bin", "bin/flint", "the flint binary")
	members := flag.Int("members", 3, "members of the group")
	pairs := flag.Int("pairs", 3, "group/single pairs of redis-benchmark runs")
	out := flag.String("out", "", "directory for the raw output (results/... , which git ignores)")
	serveArgs := flag.String("serve-args", "", "more flags for every flint serve, space-separated")
	catchup := flag.Bool("catchup", false, "measure a follower's catch-up instead")
	behind := flag.Int64("behind", 1<<30, "catch-up: bytes of values written while the follower is down")
	valueSize := flag.Int("value-size", 4096, "catch-up: size of those values")
	keyspace := flag.Int("keyspace", 100000, "catch-up: keys of the steady load (those values go to 10x as many)")
	workers := flag.Int("workers", 8, "catch-up: steady load's connections, each with one pipeline in flight")
	pipeline := flag.Int("pipeline", 16, "catch-up: steady load's operations per pipeline")
	reads := flag.Float64("reads", 0.95, "catch-up: fraction of the steady load's operations that are GETs")
	before := flag.Duration("before", 15*time.Second, "catch-up: steady load before the follower restarts")
	after := flag.Duration("after", 15*time.Second, "catch-up: steady load after it caught up")
	flag.IntVar(&pprofBase, "pprof-base", 0, "member i of a group serves Go profiles on 127.0.0.1:<this+i>; with -catchup, heap profiles are saved to -out during the catch-up")
	timeout := flag.Duration("timeout", 10*time.Minute, "catch-up: give up if it has not caught up by then")
	ycsb := flag.String("ycsb", "", "run these go-ycsb workloads (a,b) against Flint's 3 members and etcd's 3 instead")
	systems := flag.String("systems", "flint,etcd", "ycsb: what go-ycsb drives: flint (3 members), flint1 (one), etcd (3); the first is compared with the others")
	ycsbBin := flag.String("ycsb-bin", "go-ycsb", "ycsb: the go-ycsb binary")
	etcdBin := flag.String("etcd-bin", "etcd", "ycsb: the etcd binary (etcdctl must be on PATH)")
	threads := flag.Int("threads", 64, "ycsb: go-ycsb threads, for both")
	records := flag.Int("records", 100000, "ycsb: records loaded")
	flintOps := flag.Int("flint-ops", 500000, "ycsb: operations per run against Flint")
	etcdOps := flag.Int("etcd-ops", 50000, "ycsb: operations per run against etcd")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: replbench [flags] -- <redis-benchmark args> | bench <flint bench args>")
		fmt.Fprintln(os.Stderr, "       replbench -catchup [flags]")
		fmt.Fprintln(os.Stderr, "       replbench -ycsb a,b [flags]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *out != "" {
		if err := os.MkdirAll(*out, 0o755); err != nil {
			fail(err)
		}
	}
	serve := strings.Fields(*serveArgs)
	stopOnSignal()
	var err error
	switch {
	case *ycsb != "":
		err = runYCSB(ycsbConfig{bin: *bin, ycsb: *ycsbBin, etcd: *etcdBin, out: *out, serve: serve,
			workloads: strings.Split(*ycsb, ","), systems: strings.Split(*systems, ","), pairs: *pairs, threads: *threads, records: *records,
			flintOps: *flintOps, etcdOps: *etcdOps})
	case *catchup:
		err = runCatchup(catchupConfig{bin: *bin, out: *out, serve: serve, behind: *behind, valueSize: *valueSize,
			keyspace: *keyspace, workers: *workers, pipeline: *pipeline, reads: *reads, before: *before,
			after: *after, timeout: *timeout})
	case flag.NArg() == 0:
		flag.Usage()
		os.Exit(2)
	case flag.Arg(0) == "bench":
		err = runBench(abConfig{bin: *bin, members: *members, out: *out, serve: serve, load: flag.Args()})
	default:
		err = runAB(abConfig{bin: *bin, members: *members, pairs: *pairs, out: *out, serve: serve, load: flag.Args()})
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "replbench:", err)
	os.Exit(1)
}
