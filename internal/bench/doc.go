// Package bench is the driver behind `flint bench`: it runs the YCSB core
// workloads and the cs6450 workload against Flint, any other RESP server or
// no server at all, and reports throughput, latency per operation type,
// errors and the CPU and memory of the driver and the server.
//
// # Workloads
//
// cs6450-a, -b and -c are the users' high-throughput workload (docs/BENCHMARKS.md): keys "0" .. "999999", read
// fraction 0.5, 0.95 or 1 (the rest 128-byte PUTs, sent as SET), keys chosen
// by an unscrambled zipfian with theta 0.99 (key "0" about 6.5% of draws,
// the top 1000 keys about half). ycsb-a .. ycsb-f are YCSB's core
// workloads with their mixes and request distributions (scrambled zipfian,
// latest), keys "user" + a 10-digit zero-padded number, so that a scan,
// sent as RANGE key "user9999999999" LIMIT n, returns the n keys after key
// in numeric order. The zipfian generator is that of Gray et al. as YCSB
// implements it; see zipfian.go. tx-5 measures transactions: each operation
// is MULTI, SETs of 128 bytes to the 5 keys from a uniformly drawn one
// ("n" .. "n+4", 100,000 records), and EXEC, acknowledged if EXEC's reply
// holds 5 OKs. sets-5 sends the same 5 SETs without MULTI and EXEC, in one
// batch: the cost of the transaction is the difference. Their keys are in
// different slots: tx-5 is for a server of one group.
//
// # How operations run
//
// Each of --workers goroutines owns a generator seeded with (--seed,
// worker index) and a client.Batch. It takes --pipeline operations from its
// generator, sends them as one batch, waits for every reply, records them,
// and repeats: its operations run in the order generated, and each counts
// once its reply has arrived (acknowledged, or an error). The client
// shares --conns connections among the workers and pipelines their
// batches. With --rate the loop is open: operation i of a worker is due at
// start + i*workers/rate, and its latency runs from then, so a slow server
// cannot hide its queueing (coordinated omission). The driver's own
// lateness counts too: Go's timers can wake a sleeping worker up to a
// millisecond late, so at low rates a median in the hundreds of
// microseconds is the driver's floor (`--target null --rate R` measures
// it). Operations due during --warmup run but are not measured.
//
// Before the run phase the records are loaded with batches of SETs from 8 goroutines;
// a target that holds the same records from an earlier run of the same
// invocation is not loaded again. A workload that scans first probes the
// target with RANGE: an unknown-command error makes the run "unsupported".
//
// # Output files
//
// With --out DIR, Run writes DIR/result.json (below), DIR/bench.txt (the
// benchmark lines also printed on stdout, in Go's format:
// `benchstat -col /target bench.txt` compares the targets of a comparison)
// and PNG charts: throughput.png (throughput over time), latency-cdf.png
// (latency distributions), cpu.png (cores used by driver and server over
// time, single runs) and sweep.png (throughput and p99 against the swept
// parameter, sweeps).
//
// # Result format, version 1
//
// result.json is one JSON object; durations in config are Go duration
// strings ("10s"), latencies are integer nanoseconds, rates per second.
// A field is added without a version change; one that changes meaning or
// goes changes the version.
//
//	version   1
//	command   the command line
//	started   RFC 3339 time
//	machine   {hostname, cpus, cpu_model, gomaxprocs, goos, goarch, go_version}
//	config    every setting, defaults filled in: target, spawn, spawn_args,
//	          server_pid, compare, compare_pid, pairs, workload, mix {type: fraction},
//	          distribution, theta, records, value_size, scan_length, duration,
//	          ops, warmup, workers, pipeline, conns, rate, seed, sweep
//	runs      [run ...], in the order run
//	compare   (--compare) {a, b: targets; pairs: [{a, b: indices into runs,
//	          ratios}]; median: ratios}, where ratios are A over B:
//	          {throughput, p99, server_cpu_per_op}, 0 when unknown
//	sweep     (--sweep) {param, values: [string], runs: [indices into runs]}
//
// A run is
//
//	label                  "A1", "B1", ... in a comparison; "workers=4" in a sweep
//	target, target_kind, target_name   the URL; flint, redis or null; the name in reports
//	spawned, server_pid    whether this invocation started the server; its pid if known
//	params                 {workers, pipeline, conns, value_size, rate} of this run
//	status                 ok | unsupported | failed | interrupted; error: why, if not ok
//	load                   {records, value_size, seconds, reused}, absent for null
//	started, elapsed_s     start of the run phase; measured seconds (warm-up excluded)
//	warmup_ops             operations completed during the warm-up, not counted below
//	issued                 measured operations sent; always acknowledged + errors
//	acknowledged, errors   replied to with a result (a nil GET is one) or not
//	errors_by_kind         {kind: count}: an error reply's code ("ERR", ...), or
//	                       unexpected-reply, unknown-outcome, connect, protocol, other
//	ops_per_s              acknowledged per measured second
//	latency                {count, mean_ns, p50_ns, p90_ns, p99_ns, p99_9_ns, max_ns}
//	cdf                    [{ns, fraction}] at fractions 1-10^(-k/20), k = 0..100, then 1
//	ops                    {read|update|insert|scan|rmw|tx|sets: {issued, acknowledged,
//	                       errors, ops_per_s, latency, cdf}} for the workload's types
//	timeline               [{t_s, ops_per_s}] each second since the run phase began
//	resources              procstat.Report over the measured time: per process
//	                       ("driver", "server") cpu_s, mean_cores, peak_rss_bytes;
//	                       machine cpu busy, loopback bytes/s, per-second samples
//	server_cpu_ns_per_op   server CPU time / issued, when its pid is known
//	driver_cpu_ns_per_op   the same for this process
//	driver_ops_per_core_s  issued / driver CPU seconds: with null, the driver's ceiling
package bench
