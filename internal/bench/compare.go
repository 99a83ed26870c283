package bench

import (
	"context"
	"fmt"
	"slices"
	"text/tabwriter"
)

// compare runs a and b alternately, A B A B ..., and records the ratios of
// each pair and their medians: on a shared, noisy machine a ratio measured
// side by side is steadier than either figure alone.
func (s *session) compare(ctx context.Context, res *Result, a, b *target) {
	c := &Comparison{A: a.url, B: b.url}
	for i := range or(s.cfg.Pairs, DefaultPairs) {
		if ctx.Err() != nil {
			break
		}
		ra := s.measure(ctx, a, s.base, fmt.Sprintf("A%d", i+1))
		rb := s.measure(ctx, b, s.base, fmt.Sprintf("B%d", i+1))
		res.Runs = append(res.Runs, ra, rb)
		s.printShort(ra)
		s.printShort(rb)
		c.Pairs = append(c.Pairs, Pair{A: len(res.Runs) - 2, B: len(res.Runs) - 1, Ratios: ratios(ra, rb)})
	}
	c.Median = medianRatios(c.Pairs)
	res.Compare = c
	s.printCompare(res)
}

// ratios returns A's figures over B's, each 0 if either side lacks it.
func ratios(a, b RunResult) Ratios {
	if a.Status != StatusOK || b.Status != StatusOK {
		return Ratios{}
	}
	return Ratios{
		Throughput:     ratio(a.OpsPerSec, b.OpsPerSec),
		P99:            ratio(float64(a.Latency.P99Ns), float64(b.Latency.P99Ns)),
		ServerCPUPerOp: ratio(a.ServerCPUNsPerOp, b.ServerCPUNsPerOp),
	}
}

func ratio(a, b float64) float64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	return a / b
}

func medianRatios(pairs []Pair) Ratios {
	pick := func(f func(Ratios) float64) float64 {
		var v []float64
		for _, p := range pairs {
			if x := f(p.Ratios); x > 0 {
				v = append(v, x)
			}
		}
		return median(v)
	}
	return Ratios{
		Throughput:     pick(func(r Ratios) float64 { return r.Throughput }),
		P99:            pick(func(r Ratios) float64 { return r.P99 }),
		ServerCPUPerOp: pick(func(r Ratios) float64 { return r.ServerCPUPerOp }),
	}
}

// median returns the median of v, 0 if v is empty.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}

// printShort prints one line about a run of a comparison or a sweep.
func (s *session) printShort(r RunResult) {
	if r.Status == StatusUnsupported || r.Issued == 0 {
		fmt.Fprintf(s.stdout, "%-12s %-8s %s: %s\n", r.Label, r.TargetName, r.Status, r.Error)
		return
	}
	fmt.Fprintf(s.stdout, "%-12s %-8s %10.0f ops/s  p50 %s  p99 %s  p99.9 %s  server cpu %s/op  errors %d  %s\n",
		r.Label, r.TargetName, r.OpsPerSec, fmtNs(r.Latency.P50Ns), fmtNs(r.Latency.P99Ns), fmtNs(r.Latency.P999Ns),
		fmtCPU(r.ServerCPUNsPerOp), r.Errors, r.Status)
}

func fmtCPU(ns float64) string {
	if ns <= 0 {
		return "?"
	}
	return fmtNs(int64(ns))
}

// printCompare prints the table of pairs and the median ratios.
func (s *session) printCompare(res *Result) {
	c := res.Compare
	if len(c.Pairs) == 0 {
		return // interrupted before the first pair
	}
	a, b := res.Runs[c.Pairs[0].A].TargetName, res.Runs[c.Pairs[0].B].TargetName
	fmt.Fprintf(s.stdout, "\n%s: A = %s (%s), B = %s (%s); %s\n", s.base.w.name, a, c.A, b, c.B, s.describe(s.base.params()))
	tw := tabwriter.NewWriter(s.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "pair\tA ops/s\tB ops/s\tA/B\tA p99\tB p99\tA/B\tA cpu/op\tB cpu/op\tA/B\t")
	for i, p := range c.Pairs {
		ra, rb := res.Runs[p.A], res.Runs[p.B]
		fmt.Fprintf(tw, "%d\t%.0f\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", i+1, ra.OpsPerSec, rb.OpsPerSec, fmtRatio(p.Ratios.Throughput),
			fmtNs(ra.Latency.P99Ns), fmtNs(rb.Latency.P99Ns), fmtRatio(p.Ratios.P99),
			fmtCPU(ra.ServerCPUNsPerOp), fmtCPU(rb.ServerCPUNsPerOp), fmtRatio(p.Ratios.ServerCPUPerOp))
	}
	m := c.Median
	fmt.Fprintf(tw, "median\t\t\t%s\t\t\t%s\t\t\t%s\t\n", fmtRatio(m.Throughput), fmtRatio(m.P99), fmtRatio(m.ServerCPUPerOp))
	tw.Flush()
}

func fmtRatio(r float64) string {
	if r <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", r)
}
