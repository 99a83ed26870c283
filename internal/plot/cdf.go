package plot

import (
	"fmt"
	"math"
	"time"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
)

// LatencyCDF charts latency distributions, one line per operation type (or
// per server), so that the median and the tail can be read off together.
//
// The latency axis is logarithmic. The other axis is the percentile, spaced
// by the logarithm of the fraction of operations slower (1 - fraction), so
// p50, p90, p99, p99.9 and p99.99 are evenly spaced, each with a grid line,
// and the tail is as readable as the median. A line rises to the right; the
// higher it is at a given latency, the fewer operations took longer.
type LatencyCDF struct {
	Title  string
	Series []LatencySeries
}

// LatencySeries is the cumulative distribution of one set of latencies,
// such as a histogram's cumulative distribution.
type LatencySeries struct {
	Name   string         // e.g. "GET" or "flint GET"
	Points []LatencyPoint // in ascending order of latency
}

// LatencyPoint says that a fraction of the operations took at most Latency.
type LatencyPoint struct {
	Latency  time.Duration
	Fraction float64 // cumulative, in [0, 1]
}

// Deepest and shallowest percentile shown: the axis always reaches p99, and
// goes as deep as the data, to p99.9999.
const (
	shallowestTail = 1e-2
	deepestTail    = 1e-6
)

// Write draws the chart into file, a .png or .svg. Points with a latency <= 0
// cannot be placed on the log axis and are left out, as are series without
// points; if no point is left Write returns ErrNoData. Fractions are clamped
// to [0, 1]; those beyond the deepest percentile shown (such as 1, the
// maximum) are drawn on the top edge.
func (c LatencyCDF) Write(file string) error {
	p := newPlot(c.Title, "latency (log scale)", "percentile")
	legend := newLegend()
	tail := tailDepth(c.Series)
	p.Y.Scale = gplot.InvertedScale{Normalizer: gplot.LogScale{}}
	p.Y.Min, p.Y.Max = tail, 1
	p.Y.Tick.Marker = percentileTicks(tail)
	p.X.Scale = gplot.LogScale{}
	p.X.Tick.Marker = logTicks{format: formatNanos}
	var latency valueRange
	var n int
	for _, s := range c.Series {
		xys := cdfXYs(s.Points, tail)
		if len(xys) == 0 {
			continue
		}
		thumbs, err := addLine(p, n, xys, false)
		if err != nil {
			return fmt.Errorf("plot: series %q: %w", s.Name, err)
		}
		legend.Add(s.Name, thumbs...)
		for _, xy := range xys {
			latency.add(xy.X)
		}
		n++
	}
	if n == 0 {
		return ErrNoData
	}
	p.X.Min, p.X.Max = logRange(latency.lo, latency.hi)
	return save(file, legend, p)
}

// cdfXYs converts points with a latency > 0 to (nanoseconds, fraction of
// operations slower), the latter at least tail.
func cdfXYs(points []LatencyPoint, tail float64) plotter.XYs {
	xys := make(plotter.XYs, 0, len(points))
	for _, pt := range points {
		if pt.Latency > 0 {
			slower := 1 - math.Min(math.Max(pt.Fraction, 0), 1)
			xys = append(xys, plotter.XY{X: float64(pt.Latency), Y: math.Max(slower, tail)})
		}
	}
	return xys
}

// tailDepth returns the smallest fraction of operations slower that the
// percentile axis must show: the smallest positive one in the data, rounded
// down to a power of ten, between deepestTail and shallowestTail.
func tailDepth(series []LatencySeries) float64 {
	tail := shallowestTail
	for _, s := range series {
		for _, pt := range s.Points {
			if slower := 1 - pt.Fraction; slower > 0 && slower < tail {
				tail = slower
			}
		}
	}
	tail = math.Pow10(int(math.Floor(math.Log10(tail) + 1e-9)))
	return math.Max(tail, deepestTail)
}

// percentileTicks label p50, p90, p99, ... down to tail, the fraction of
// operations slower at the deepest.
func percentileTicks(tail float64) gplot.ConstantTicks {
	ticks := gplot.ConstantTicks{{Value: 1, Label: "p0"}, {Value: 0.5, Label: "p50"}}
	labels := []string{"p90", "p99", "p99.9", "p99.99", "p99.999", "p99.9999"}
	for i, slower := 0, 0.1; slower >= tail*(1-1e-9); i, slower = i+1, slower/10 {
		ticks = append(ticks, gplot.Tick{Value: slower, Label: labels[i]})
	}
	return ticks
}
