package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// abConfig configures the A/B runs of a group against a single node.
type abConfig struct {
	bin     string
	members int
	pairs   int
	out     string   // directory for the raw output; "" for none
	serve   []string // more flags for every flint serve
	load    []string // redis-benchmark arguments, or "bench" and flint bench arguments
}

// runStat is what one run measured on one deployment.
type runStat struct {
	Deployment string  `json:"deployment"`
	Label      string  `json:"label"`
	OpsPerSec  float64 `json:"ops_per_s"`
	P50Ms      float64 `json:"p50_ms"`
	P99Ms      float64 `json:"p99_ms"`
	Seconds    float64 `json:"seconds"`
	Ops        float64 `json:"ops"`
	// CPUUsPerOp is the utime+stime of every member over the run, per
	// operation; LeaderCPUUsPerOp the leader's alone.
	CPUUsPerOp       float64 `json:"cpu_us_per_op"`
	LeaderCPUUsPerOp float64 `json:"leader_cpu_us_per_op"`
	// PeakRSSMiB is each member's VmHWM after the run, leader first.
	PeakRSSMiB []float64 `json:"peak_rss_mib"`
	LoadBefore string    `json:"load_before"`
	LoadAfter  string    `json:"load_after"`
}

func (r runStat) String() string {
	rss := make([]string, len(r.PeakRSSMiB))
	for i, m := range r.PeakRSSMiB {
		rss[i] = fmt.Sprintf("%.0f", m)
	}
	s := fmt.Sprintf("%-4s %-7s %10.0f ops/s  p50 %6.2f ms  p99 %6.2f ms  cpu/op %5.2f µs (leader %5.2f)",
		r.Label, r.Deployment, r.OpsPerSec, r.P50Ms, r.P99Ms, r.CPUUsPerOp, r.LeaderCPUUsPerOp)
	if len(rss) > 0 {
		s += "  peak RSS MiB " + strings.Join(rss, "/")
	}
	if r.LoadBefore != "" {
		s += fmt.Sprintf("  load %s -> %s", r.LoadBefore, r.LoadAfter)
	}
	return s
}

// runAB runs redis-benchmark against a fresh group and a fresh single node
// for each pair, the group first in odd pairs and second in even ones, so
// that a drift over the session favours neither.
func runAB(cfg abConfig) error {
	var stats []runStat
	var ratios []float64
	for p := 1; p <= cfg.pairs; p++ {
		order := []int{cfg.members, 1}
		if p%2 == 0 {
			order = []int{1, cfg.members}
		}
		byN := map[int]runStat{}
		for _, n := range order {
			st, err := benchmarkOnce(cfg, n, fmt.Sprintf("%s%d", map[bool]string{true: "A", false: "B"}[n != 1], p))
			if err != nil {
				return err
			}
			fmt.Println(st)
			byN[n] = st
			stats = append(stats, st)
		}
		r := byN[cfg.members].OpsPerSec / byN[1].OpsPerSec
		ratios = append(ratios, r)
		fmt.Printf("pair %d: %d members / 1 member = %.3f\n", p, cfg.members, r)
	}
	fmt.Printf("throughput ratios %v, median %.3f\n", ratios, median(ratios))
	return writeJSON(cfg.out, "runs.json", stats)
}

// benchmarkOnce starts a deployment of n members (1: a single node, not a
// group of one), runs redis-benchmark against its leader, and stops it.
func benchmarkOnce(cfg abConfig, n int, label string) (runStat, error) {
	root, err := os.MkdirTemp("", "replbench")
	if err != nil {
		return runStat{}, err
	}
	defer os.RemoveAll(root)
	var d *deployment
	if n == 1 {
		d, err = startSingle(cfg.bin, root, cfg.serve)
	} else {
		d, err = startGroup(cfg.bin, root, n, cfg.serve)
	}
	if err != nil {
		return runStat{}, err
	}
	defer d.stop()
	li, err := d.leader(time.Minute)
	if err != nil {
		return runStat{}, err
	}
	lead := d.members[li]
	_, port, _ := strings.Cut(lead.addr, ":")
	st := runStat{Deployment: d.name, Label: label, LoadBefore: loadavg()}
	t0, l0, start := d.cpuTicks(), procCPUTicks(lead.cmd.Process.Pid), time.Now()
	args := append([]string{"-p", port, "-q", "--csv"}, cfg.load...)
	out, err := exec.Command("redis-benchmark", args...).Output()
	if err != nil {
		return runStat{}, fmt.Errorf("redis-benchmark %s: %w", strings.Join(args, " "), err)
	}
	st.Seconds = time.Since(start).Seconds()
	t1, l1 := d.cpuTicks(), procCPUTicks(lead.cmd.Process.Pid)
	st.LoadAfter = loadavg()
	if err := parseBenchmarkCSV(out, &st); err != nil {
		return runStat{}, err
	}
	st.Ops = st.OpsPerSec * st.Seconds // approximately: redis-benchmark's own time excludes its start
	if n := flagInt(cfg.load, "-n"); n > 0 {
		st.Ops = float64(n)
	}
	st.CPUUsPerOp = float64(t1-t0) * 1e4 / st.Ops
	st.LeaderCPUUsPerOp = float64(l1-l0) * 1e4 / st.Ops
	st.PeakRSSMiB = peakRSS(d, li)
	if cfg.out != "" {
		os.WriteFile(filepath.Join(cfg.out, label+"-"+d.name+".csv"), out, 0o644)
	}
	return st, nil
}

// peakRSS returns the members' VmHWM in MiB, the leader's first.
func peakRSS(d *deployment, leader int) []float64 {
	var v []float64
	for _, i := range append([]int{leader}, slices.DeleteFunc(indexes(len(d.members)), func(i int) bool { return i == leader })...) {
		if s := d.members[i]; s.cmd != nil {
			v = append(v, float64(procMem(s.cmd.Process.Pid).hwm)/1024)
		}
	}
	return v
}

func indexes(n int) []int {
	v := make([]int, n)
	for i := range v {
		v[i] = i
	}
	return v
}

// parseBenchmarkCSV reads redis-benchmark's last CSV line:
// "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms".
func parseBenchmarkCSV(out []byte, st *runStat) error {
	recs, err := csv.NewReader(strings.NewReader(string(out))).ReadAll()
	if err != nil || len(recs) < 2 || len(recs[len(recs)-1]) < 7 {
		return fmt.Errorf("redis-benchmark printed no result: %q", out)
	}
	last := recs[len(recs)-1]
	st.OpsPerSec, _ = strconv.ParseFloat(last[1], 64)
	st.P50Ms, _ = strconv.ParseFloat(last[4], 64)
	st.P99Ms, _ = strconv.ParseFloat(last[6], 64)
	return nil
}

// flagInt returns the integer after name in args, or 0.
func flagInt(args []string, name string) int {
	for i, a := range args[:max(len(args)-1, 0)] {
		if a == name {
			n, _ := strconv.Atoi(args[i+1])
			return n
		}
	}
	return 0
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// writeJSON writes v as dir/name, if dir is set.
func writeJSON(dir, name string, v any) error {
	if dir == "" {
		return nil
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name), b, 0o644)
}
