package bench

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/flintkv/flint/internal/plot"
)

// The charts written into --out, as PNG.
const (
	plotThroughput = "throughput.png"  // operations per second over time, one line per run
	plotLatency    = "latency-cdf.png" // latency distributions
	plotCPU        = "cpu.png"         // CPU cores used over time by the driver and the server
	plotSweep      = "sweep.png"       // throughput and p99 against the swept parameter
)

// writePlots draws the charts of res into dir: the throughput over time and
// the latency distributions always; for a single run the CPU use over time,
// and for a sweep the sweep curves. A chart without data (every run
// unsupported) is left out.
func (s *session) writePlots(dir string, res *Result) error {
	charts := map[string]interface{ Write(string) error }{
		plotThroughput: s.throughputChart(res),
		plotLatency:    s.latencyChart(res),
	}
	switch {
	case res.Sweep != nil:
		charts[plotSweep] = s.sweepChart(res)
	case res.Compare == nil && len(res.Runs) == 1:
		charts[plotCPU] = s.cpuChart(res.Runs[0])
	}
	for name, c := range charts {
		if err := c.Write(filepath.Join(dir, name)); err != nil && !errors.Is(err, plot.ErrNoData) {
			return fmt.Errorf("bench: %w", err)
		}
	}
	return nil
}

// runName names a run in a legend: its target, and its label in a
// comparison or a sweep.
func runName(r RunResult) string {
	if r.Label == "" {
		return r.TargetName
	}
	return r.TargetName + " " + r.Label
}

func (s *session) title(res *Result, what string) string {
	return fmt.Sprintf("%s: %s (%s)", s.base.w.name, what, res.Started.Format(time.DateTime))
}

func (s *session) throughputChart(res *Result) plot.TimeSeries {
	c := plot.TimeSeries{Title: s.title(res, "throughput"), YLabel: "throughput (ops/s)"}
	for _, r := range res.Runs {
		pts := make([]plot.Point, len(r.Timeline))
		for i, p := range r.Timeline {
			pts[i] = plot.Point{X: p.T, Y: p.OpsPerSec}
		}
		c.Series = append(c.Series, plot.Series{Name: runName(r), Points: pts})
	}
	return c
}

// latencyChart has a line per operation type for a single run, and a line
// per run (every operation) for a sweep; for a comparison, a line per
// target from the last pair.
func (s *session) latencyChart(res *Result) plot.LatencyCDF {
	c := plot.LatencyCDF{Title: s.title(res, "latency")}
	switch runs := res.Runs; {
	case res.Compare != nil && len(res.Compare.Pairs) > 0:
		last := res.Compare.Pairs[len(res.Compare.Pairs)-1]
		for _, r := range []RunResult{runs[last.A], runs[last.B]} {
			c.Series = append(c.Series, plot.LatencySeries{Name: runName(r), Points: latencyPoints(r.CDF)})
		}
	case res.Sweep != nil:
		for _, r := range runs {
			c.Series = append(c.Series, plot.LatencySeries{Name: runName(r), Points: latencyPoints(r.CDF)})
		}
	case len(runs) == 1:
		for _, k := range s.base.w.kinds() {
			c.Series = append(c.Series, plot.LatencySeries{Name: k.String(), Points: latencyPoints(runs[0].Ops[k.String()].CDF)})
		}
	}
	return c
}

func latencyPoints(cdf []CDFPoint) []plot.LatencyPoint {
	pts := make([]plot.LatencyPoint, len(cdf))
	for i, p := range cdf {
		pts[i] = plot.LatencyPoint{Latency: time.Duration(p.Ns), Fraction: p.Fraction}
	}
	return pts
}

// cpuChart shows the cores used by each sampled process, second by second.
func (s *session) cpuChart(r RunResult) plot.TimeSeries {
	c := plot.TimeSeries{Title: fmt.Sprintf("%s on %s: CPU", s.base.w.name, r.TargetName), YLabel: "CPU (cores)"}
	if r.Resources == nil {
		return c
	}
	for _, name := range []string{"server", "driver"} {
		var pts []plot.Point
		for _, smp := range r.Resources.Samples {
			if p, ok := smp.Procs[name]; ok {
				pts = append(pts, plot.Point{X: smp.ElapsedSeconds, Y: p.Cores})
			}
		}
		c.Series = append(c.Series, plot.Series{Name: name, Points: pts})
	}
	return c
}

// sweepChart plots throughput and p99 against the swept parameter, on a log
// axis when the values grow by a factor of 8 or more.
func (s *session) sweepChart(res *Result) plot.Sweep {
	sw := res.Sweep
	c := plot.Sweep{Title: s.title(res, "sweep of "+sw.Param), XLabel: sw.Param}
	if sw.Param == "value-size" {
		c.XLabel, c.FormatX, c.LogY = "value size", plot.FormatBytes, true
	}
	var series plot.SweepSeries
	lo, hi := 0.0, 0.0
	for i, ri := range sw.Runs {
		x, _ := strconv.ParseFloat(sw.Values[i], 64)
		r := res.Runs[ri]
		series.Name = r.TargetName
		series.Points = append(series.Points, plot.SweepPoint{X: x, Throughput: r.OpsPerSec, P99: time.Duration(r.Latency.P99Ns)})
		if i == 0 || x < lo {
			lo = x
		}
		hi = max(hi, x)
	}
	c.LogX = lo > 0 && hi/lo >= 8
	c.Series = []plot.SweepSeries{series}
	return c
}
