package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flintkv/flint/internal/server"
	"github.com/flintkv/flint/internal/server/servertest"
)

// run runs cfg, failing the test on an error, and returns the result.
func run(t *testing.T, cfg Config) *Result {
	t.Helper()
	var out strings.Builder
	cfg.Stdout = &out
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Run: %v\noutput:\n%s", err, out.String())
	}
	t.Logf("output:\n%s", out.String())
	return res
}

// checkCounts checks what every run must satisfy: each issued operation
// was acknowledged or failed, per type and in all.
func checkCounts(t *testing.T, r RunResult) {
	t.Helper()
	if r.Issued != r.Acknowledged+r.Errors {
		t.Errorf("issued %d != acknowledged %d + errors %d", r.Issued, r.Acknowledged, r.Errors)
	}
	var issued, errs int64
	for name, o := range r.Ops {
		if o.Issued != o.Acknowledged+o.Errors {
			t.Errorf("%s: issued %d != acknowledged %d + errors %d", name, o.Issued, o.Acknowledged, o.Errors)
		}
		if o.Latency.Count != o.Acknowledged {
			t.Errorf("%s: %d latencies for %d acknowledged", name, o.Latency.Count, o.Acknowledged)
		}
		issued += o.Issued
	}
	for _, n := range r.ErrorsByKind {
		errs += n
	}
	if issued != r.Issued || errs != r.Errors {
		t.Errorf("per type: %d issued, by kind %d errors; in all %d and %d", issued, errs, r.Issued, r.Errors)
	}
}

func TestNullTarget(t *testing.T) {
	res := run(t, Config{Target: "null", Workload: "cs6450-b", Ops: 20_000, Workers: 2, Pipeline: 16})
	r := res.Runs[0]
	checkCounts(t, r)
	if r.Status != StatusOK || r.Acknowledged != 20_000 || r.Errors != 0 {
		t.Errorf("status %s, acknowledged %d, errors %d; want ok, 20000, 0", r.Status, r.Acknowledged, r.Errors)
	}
	if r.Ops["read"].Acknowledged == 0 || r.Ops["update"].Acknowledged == 0 || len(r.Ops) != 2 {
		t.Errorf("ops by type %+v, want reads and updates", r.Ops)
	}
	if r.Load != nil || r.Resources == nil || r.Resources.Procs["driver"].PID != os.Getpid() {
		t.Errorf("load %+v, resources %+v; want no load and the driver sampled", r.Load, r.Resources)
	}
}

// TestOpenLoop checks the open-loop schedule: every operation due before
// the deadline is sent, however fast the target.
func TestOpenLoop(t *testing.T) {
	res := run(t, Config{Target: "null", Workload: "cs6450-c", Duration: 300 * time.Millisecond,
		Warmup: 100 * time.Millisecond, Rate: 1000, Workers: 2, Pipeline: 4})
	r := res.Runs[0]
	checkCounts(t, r)
	// Each worker is due every 2ms: 50 in the warm-up, 150 measured.
	if r.WarmupOps != 100 || r.Issued != 300 {
		t.Errorf("warm-up %d, issued %d; want 100 and 300", r.WarmupOps, r.Issued)
	}
}

// TestScanAndInsertOnFlint runs ycsb-e (RANGE scans and inserts) against
// an in-process server and checks the inserts landed.
func TestScanAndInsertOnFlint(t *testing.T) {
	srv := servertest.Start(t, server.Config{})
	res := run(t, Config{Target: "flint://" + srv.Addr, Workload: "ycsb-e", Records: 2000, ValueSize: 100, Ops: 3000, Workers: 3, Pipeline: 4})
	r := res.Runs[0]
	checkCounts(t, r)
	scans, inserts := r.Ops["scan"], r.Ops["insert"]
	if r.Status != StatusOK || r.Errors != 0 || scans.Acknowledged == 0 || inserts.Acknowledged == 0 {
		t.Fatalf("status %s, errors %v, scans %d, inserts %d", r.Status, r.ErrorsByKind, scans.Acknowledged, inserts.Acknowledged)
	}
	if r.Load == nil || r.Load.Records != 2000 {
		t.Errorf("load %+v, want 2000 records", r.Load)
	}
	n := 0
	srv.Store.Snapshot().Range([]byte("user"), []byte("user9999999999"), 0, func(string, []byte) bool { n++; return true })
	if want := 2000 + int(inserts.Acknowledged); n != want {
		t.Errorf("store holds %d keys, want 2000 loaded + %d inserted", n, inserts.Acknowledged)
	}
}

// TestReadModifyWriteOnFlint runs ycsb-f against an in-process server.
func TestReadModifyWriteOnFlint(t *testing.T) {
	srv := servertest.Start(t, server.Config{})
	res := run(t, Config{Target: "flint://" + srv.Addr, Workload: "ycsb-f", Records: 1000, Ops: 4000, Workers: 4, Pipeline: 8})
	r := res.Runs[0]
	checkCounts(t, r)
	if r.Status != StatusOK || r.Errors != 0 || r.Ops["rmw"].Acknowledged == 0 || r.Ops["read"].Acknowledged == 0 {
		t.Errorf("status %s, errors %v, ops %+v", r.Status, r.ErrorsByKind, r.Ops)
	}
}

// TestTransactionsOnFlint runs tx-5 and sets-5 against an in-process
// server: every operation is acknowledged, and the SETs to the keys after
// the drawn one land too (100 records are loaded; with 2000 draws, some
// draw 96 .. 99 and writes keys past 99, but for a chance of about e^-80).
func TestTransactionsOnFlint(t *testing.T) {
	for _, tc := range []struct{ workload, kind string }{{"tx-5", "tx"}, {"sets-5", "sets"}} {
		t.Run(tc.workload, func(t *testing.T) {
			srv := servertest.Start(t, server.Config{})
			res := run(t, Config{Target: "flint://" + srv.Addr, Workload: tc.workload, Records: 100, ValueSize: 16,
				Ops: 2000, Workers: 4, Pipeline: 8})
			r := res.Runs[0]
			checkCounts(t, r)
			if r.Status != StatusOK || r.Errors != 0 || r.Ops[tc.kind].Acknowledged != 2000 {
				t.Errorf("status %s, errors %v, ops %+v", r.Status, r.ErrorsByKind, r.Ops)
			}
			if n := srv.Store.Len(); n <= 100 {
				t.Errorf("store holds %d keys, want more than the 100 loaded", n)
			}
		})
	}
}

// fakeServer answers every command with reply, like a server that knows
// none of them.
func fakeServer(t *testing.T, reply string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go answer(c, reply)
		}
	}()
	return ln.Addr().String()
}

// answer replies to each RESP command read from c.
func answer(c net.Conn, reply string) {
	defer c.Close()
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		var n int
		if _, err := fmt.Sscanf(line, "*%d", &n); err != nil {
			return
		}
		for range 2 * n { // $len, then the argument
			if _, err := r.ReadString('\n'); err != nil {
				return
			}
		}
		if _, err := c.Write([]byte(reply)); err != nil {
			return
		}
	}
}

func TestRangeUnsupported(t *testing.T) {
	addr := fakeServer(t, "-ERR unknown command 'RANGE', with args beginning with: 'user9999999999' \r\n")
	res := run(t, Config{Target: "redis://" + addr, Workload: "ycsb-e", Records: 10, Ops: 10})
	r := res.Runs[0]
	if r.Status != StatusUnsupported || !strings.Contains(r.Error, "no RANGE command") {
		t.Errorf("status %q, error %q; want unsupported for lack of RANGE", r.Status, r.Error)
	}
	if r.Issued != 0 || r.Load != nil {
		t.Errorf("issued %d, load %+v; want nothing sent", r.Issued, r.Load)
	}
}

// TestServerLost checks a run whose server goes away: the run fails, and
// every operation issued is still counted once.
func TestServerLost(t *testing.T) {
	srv := servertest.Start(t, server.Config{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for start := time.Now(); srv.Store.Len() < 1000 && time.Since(start) < 10*time.Second; { // loaded: the run phase is starting
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
		srv.Stop(t)
	}()
	defer func() { <-stopped }()
	res, err := Run(context.Background(), Config{Target: "flint://" + srv.Addr, Workload: "cs6450-a", Records: 1000,
		Duration: 20 * time.Second, Workers: 4, Pipeline: 8})
	if err == nil {
		t.Fatal("Run succeeded with its server stopped")
	}
	r := res.Runs[0]
	t.Logf("error: %v\nerrors by kind: %v", err, r.ErrorsByKind)
	checkCounts(t, r)
	if r.Status != StatusFailed || r.Errors == 0 || r.ElapsedSeconds > 15 {
		t.Errorf("status %s, errors %d after %.1fs; want failed with errors, soon", r.Status, r.Errors, r.ElapsedSeconds)
	}
}

func TestCompare(t *testing.T) {
	res := run(t, Config{Target: "null", Compare: "null", Workload: "ycsb-c", Records: 100, Ops: 2000, Workers: 2, Pipeline: 8})
	c := res.Compare
	if c == nil || len(c.Pairs) != DefaultPairs || len(res.Runs) != 2*DefaultPairs {
		t.Fatalf("comparison %+v with %d runs; want %d pairs", c, len(res.Runs), DefaultPairs)
	}
	for i, p := range c.Pairs {
		a, b := res.Runs[p.A], res.Runs[p.B]
		if a.TargetName != "null-A" || b.TargetName != "null-B" || a.Label != fmt.Sprintf("A%d", i+1) {
			t.Errorf("pair %d: %s %s, %s %s", i, a.Label, a.TargetName, b.Label, b.TargetName)
		}
		if p.Ratios.Throughput <= 0 {
			t.Errorf("pair %d: throughput ratio %v", i, p.Ratios.Throughput)
		}
	}
	if c.Median.Throughput <= 0 {
		t.Errorf("median throughput ratio %v", c.Median.Throughput)
	}
}

func TestSweepWritesFiles(t *testing.T) {
	dir := t.TempDir()
	res := run(t, Config{Target: "null", Workload: "cs6450-a", Ops: 1000, Sweep: "pipeline=1,8,64", Out: dir, Command: "flint bench test"})
	if res.Sweep == nil || len(res.Runs) != 3 || res.Runs[2].Params.Pipeline != 64 || res.Runs[2].Label != "pipeline=64" {
		t.Fatalf("sweep %+v, runs %d", res.Sweep, len(res.Runs))
	}
	b, err := os.ReadFile(filepath.Join(dir, resultFile))
	if err != nil {
		t.Fatal(err)
	}
	var got Result
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Version != SchemaVersion || got.Command != "flint bench test" || len(got.Runs) != 3 || got.Config.Workload != "cs6450-a" {
		t.Errorf("result.json: version %d, command %q, %d runs, config %+v", got.Version, got.Command, len(got.Runs), got.Config)
	}
	lines, err := os.ReadFile(filepath.Join(dir, benchFile))
	if err != nil || !strings.Contains(string(lines), "BenchmarkFlint/cs6450-a/target=null/pipeline=8\t1000\t") {
		t.Errorf("bench.txt (%v):\n%s", err, lines)
	}
	for _, f := range []string{plotThroughput, plotLatency, plotSweep} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"no target", Config{Workload: "cs6450-b", Ops: 1}},
		{"both targets", Config{Target: "null", Spawn: true, Workload: "cs6450-b", Ops: 1}},
		{"bad scheme", Config{Target: "http://127.0.0.1:1", Workload: "cs6450-b", Ops: 1}},
		{"no port", Config{Target: "flint://127.0.0.1", Workload: "cs6450-b", Ops: 1}},
		{"unknown workload", Config{Target: "null", Workload: "ycsb-z", Ops: 1}},
		{"no end", Config{Target: "null", Workload: "cs6450-b"}},
		{"theta", Config{Target: "null", Workload: "cs6450-b", Ops: 1, Theta: 1}},
		{"distribution", Config{Target: "null", Workload: "cs6450-b", Ops: 1, Distribution: "normal"}},
		{"pairs", Config{Target: "null", Compare: "null", Pairs: 2, Workload: "cs6450-b", Ops: 1}},
		{"compare and sweep", Config{Target: "null", Compare: "null", Sweep: "workers=1", Workload: "cs6450-b", Ops: 1}},
		{"sweep param", Config{Target: "null", Sweep: "theta=1", Workload: "cs6450-b", Ops: 1}},
		{"sweep value", Config{Target: "null", Sweep: "workers=1,x", Workload: "cs6450-b", Ops: 1}},
		{"sweep range", Config{Target: "null", Sweep: "workers=0", Workload: "cs6450-b", Ops: 1}},
		{"too big", Config{Target: "null", Workload: "cs6450-b", Ops: 1, ValueSize: 4 << 20}},
	} {
		if _, err := Run(context.Background(), tc.cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: error %v, want ErrConfig", tc.name, err)
		}
	}
}

func TestParseTarget(t *testing.T) {
	tg, err := parseTarget("redis://:secret@127.0.0.1:6379")
	if err != nil || tg.kind != kindRedis || tg.addr != "127.0.0.1:6379" || tg.password != "secret" || strings.Contains(tg.url, "secret") {
		t.Errorf("parseTarget = %+v, %v", tg, err)
	}
}

// TestInterrupted checks that ending the context stops a run early, as
// Ctrl-C does, and keeps what it measured.
func TestInterrupted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	res, err := Run(ctx, Config{Target: "null", Compare: "null", Workload: "cs6450-b", Records: 1000,
		Duration: time.Minute, Workers: 2, Out: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 2 || res.Runs[0].Status != StatusInterrupted || res.Runs[0].Acknowledged == 0 {
		t.Fatalf("%d runs, first %+v; want one interrupted pair", len(res.Runs), res.Runs[0])
	}
	checkCounts(t, res.Runs[0])
}
