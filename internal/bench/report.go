package bench

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
)

// printRun prints the full report of one run: what ran, the load, a table
// of throughput and latency per operation type, the counts and errors, and
// the resources used.
func (s *session) printRun(r RunResult) {
	w := s.stdout
	fmt.Fprintf(w, "\n%s on %s%s: %s\n", s.base.w.name, r.Target, spawnedNote(r), s.describe(r.Params))
	if r.Load != nil && !r.Load.Reused {
		fmt.Fprintf(w, "load: %d records of %d bytes in %.2fs\n", r.Load.Records, r.Load.ValueSize, r.Load.Seconds)
	}
	if r.Status == StatusUnsupported || (r.Status == StatusFailed && r.Issued == 0) {
		fmt.Fprintf(w, "%s: %s\n", r.Status, r.Error)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "op\tacknowledged\terrors\tops/s\tp50\tp90\tp99\tp99.9\tmax\t")
	for _, k := range s.base.w.kinds() {
		o := r.Ops[k.String()]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%s\n", k, o.Acknowledged, o.Errors, o.OpsPerSec, latencyCells(o.Latency))
	}
	fmt.Fprintf(tw, "all\t%d\t%d\t%.0f\t%s\n", r.Acknowledged, r.Errors, r.OpsPerSec, latencyCells(r.Latency))
	tw.Flush()
	fmt.Fprintf(w, "issued %d = acknowledged %d + errors %d in %.2fs (after %d warm-up ops); errors: %s\n",
		r.Issued, r.Acknowledged, r.Errors, r.ElapsedSeconds, r.WarmupOps, errorKinds(r.ErrorsByKind))
	fmt.Fprintln(w, resourceLine(r))
	if r.Status != StatusOK {
		fmt.Fprintf(w, "%s: %s\n", r.Status, r.Error)
	}
}

func spawnedNote(r RunResult) string {
	if r.Spawned {
		return " (spawned)"
	}
	return ""
}

// describe says how a run was driven.
func (s *session) describe(p Params) string {
	st := s.base
	d := fmt.Sprintf("%d workers, pipeline %d, %d conns, %d-byte values, %d records, %s", p.Workers, p.Pipeline,
		p.Conns, p.ValueSize, st.records, st.dist)
	if p.Rate > 0 {
		d += fmt.Sprintf(", open loop at %.0f ops/s", p.Rate)
	}
	if st.duration > 0 {
		d += fmt.Sprintf(", %v", st.duration)
	}
	if st.ops > 0 {
		d += fmt.Sprintf(", %d ops", st.ops)
	}
	return d
}

func latencyCells(l Latency) string {
	return strings.Join([]string{fmtNs(l.P50Ns), fmtNs(l.P90Ns), fmtNs(l.P99Ns), fmtNs(l.P999Ns), fmtNs(l.MaxNs)}, "\t") + "\t"
}

// fmtNs formats a latency to about three significant digits.
func fmtNs(ns int64) string {
	switch d := float64(ns); {
	case ns < 1e3:
		return fmt.Sprintf("%dns", ns)
	case ns < 1e6:
		return fmt.Sprintf("%.3gµs", d/1e3)
	case ns < 1e9:
		return fmt.Sprintf("%.3gms", d/1e6)
	default:
		return fmt.Sprintf("%.3gs", d/1e9)
	}
}

func errorKinds(m map[string]int64) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// resourceLine summarizes CPU, memory and loopback traffic.
func resourceLine(r RunResult) string {
	res := r.Resources
	if res == nil {
		return "resources: not sampled"
	}
	var parts []string
	switch p, ok := res.Procs["server"]; {
	case r.TargetKind == kindNull:
	case ok && r.ServerCPUNsPerOp > 0:
		parts = append(parts, fmt.Sprintf("server cpu %s/op (%.2f cores), rss peak %s", fmtNs(int64(r.ServerCPUNsPerOp)), p.MeanCores, fmtBytes(p.PeakRSSBytes)))
	default:
		parts = append(parts, "server cpu unknown (spawn it, or give its pid)")
	}
	if p, ok := res.Procs["driver"]; ok && r.DriverCPUNsPerOp > 0 {
		parts = append(parts, fmt.Sprintf("driver cpu %s/op (%.2f cores; %.0f ops/s per core), rss peak %s",
			fmtNs(int64(r.DriverCPUNsPerOp)), p.MeanCores, r.DriverOpsPerCoreSec, fmtBytes(p.PeakRSSBytes)))
	}
	parts = append(parts, fmt.Sprintf("machine cpu %.0f%% busy of %d cores, loopback %s/s",
		100*res.CPUBusy, res.Cores, fmtBytes(int64(res.LoopbackTxBytesPerSec))))
	return "resources: " + strings.Join(parts, "; ")
}

func fmtBytes(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%dB", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	default:
		return fmt.Sprintf("%.2fGiB", float64(n)/(1<<30))
	}
}

// printBenchLines prints the runs in Go's benchmark format, which
// benchstat reads:
//
//	BenchmarkFlint/cs6450-b/target=flint  N  ns/op  ops/s  p50-ns  p99-ns  p99.9-ns  [server-cpu-ns/op]
//
// N is the operations acknowledged and ns/op the wall time per operation
// (all workers together); a line per operation type follows, named with
// /op=TYPE. Repeated runs of one name (the pairs of a comparison) are
// samples benchstat summarizes.
func (s *session) printBenchLines(w io.Writer, res *Result) {
	m := res.Machine
	fmt.Fprintf(w, "\ngoos: %s\ngoarch: %s\npkg: github.com/flintkv/flint/cmd/flint\ncpu: %s\n", m.GOOS, m.GOARCH, m.CPUModel)
	for _, r := range res.Runs {
		if r.Acknowledged == 0 {
			continue
		}
		name := "BenchmarkFlint/" + s.base.w.name + "/target=" + r.TargetName
		if res.Sweep != nil {
			name += "/" + r.Label
		}
		extra := ""
		if r.ServerCPUNsPerOp > 0 {
			extra = fmt.Sprintf("\t%.0f server-cpu-ns/op", r.ServerCPUNsPerOp)
		}
		fmt.Fprintf(w, "%s\t%d\t%.1f ns/op\t%.0f ops/s\t%s%s\n", name, r.Acknowledged, 1e9/r.OpsPerSec, r.OpsPerSec, benchLatency(r.Latency), extra)
		for _, k := range s.base.w.kinds() {
			if o := r.Ops[k.String()]; o.Acknowledged > 0 {
				fmt.Fprintf(w, "%s/op=%s\t%d\t%.1f ns/op\t%.0f ops/s\t%s\n", name, k, o.Acknowledged, 1e9/o.OpsPerSec, o.OpsPerSec, benchLatency(o.Latency))
			}
		}
	}
}

func benchLatency(l Latency) string {
	return fmt.Sprintf("%d p50-ns\t%d p99-ns\t%d p99.9-ns", l.P50Ns, l.P99Ns, l.P999Ns)
}

// machine describes the machine the driver runs on.
func machine() Machine {
	host, _ := os.Hostname()
	return Machine{Hostname: host, CPUs: runtime.NumCPU(), CPUModel: cpuModel(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, GoVersion: runtime.Version()}
}

// cpuModel returns the first "model name" of /proc/cpuinfo, or "unknown".
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
