package plot

import (
	"fmt"
	"math"
	"slices"
	"time"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
)

// Sweep charts results against a swept parameter (clients, pipeline depth,
// value size), one line per Series such as "flint" and "redis": throughput
// in an upper panel and p99 latency, on a log scale, in a lower one, over the
// same X axis.
type Sweep struct {
	Title  string
	XLabel string // the parameter, with its unit: "clients", "value size"
	// LogX spaces X logarithmically, for parameters that double.
	LogX bool
	// LogY puts throughput on a log scale too, for sweeps over which it
	// falls by orders of magnitude (value size).
	LogY bool
	// FormatX labels the X ticks, one at each X in the data; nil means
	// FormatSI. FormatBytes suits sizes.
	FormatX func(float64) string
	Series  []SweepSeries
}

// SweepSeries is one line of a Sweep.
type SweepSeries struct {
	Name   string
	Points []SweepPoint // in ascending order of X
}

// SweepPoint is the result of one run of the sweep.
type SweepPoint struct {
	X          float64       // the parameter's value
	Throughput float64       // operations per second
	P99        time.Duration // 99th percentile latency
}

// Write draws the chart into file, a .png or .svg, twice as tall as the
// others. Values a log axis cannot show are left out: X <= 0 with LogX,
// throughput <= 0 with LogY, and P99 <= 0. Series without points are left
// out too; Write returns ErrNoData if no point is left.
func (c Sweep) Write(file string) error {
	series, xs := c.usable()
	if len(xs) == 0 {
		return ErrNoData
	}
	top := newPlot(c.Title, c.XLabel, "throughput (ops/s)")
	bottom := newPlot("", c.XLabel, "p99 latency (log scale)")
	c.setX(top, xs)
	c.setX(bottom, xs)
	legend := newLegend()
	var tput, p99 valueRange
	for i, s := range series {
		thumbs, err := addSweepLine(top, i, s.Points, throughputOf, c.LogY, &tput)
		if err != nil {
			return fmt.Errorf("plot: series %q: %w", s.Name, err)
		}
		latThumbs, err := addSweepLine(bottom, i, s.Points, p99Of, true, &p99)
		if err != nil {
			return fmt.Errorf("plot: series %q: %w", s.Name, err)
		}
		if thumbs == nil { // the same style
			thumbs = latThumbs
		}
		legend.Add(s.Name, thumbs...)
	}
	if c.LogY {
		setLogY(top, tput, FormatSI)
	} else {
		top.Y.Min = 0
		top.Y.Tick.Marker = linearTicks{format: FormatSI}
	}
	setLogY(bottom, p99, formatNanos)
	return save(file, legend, top, bottom)
}

func throughputOf(p SweepPoint) float64 { return p.Throughput }
func p99Of(p SweepPoint) float64        { return float64(p.P99) }

// usable returns the series that have points to draw, with only those
// points, and the distinct X values among them in ascending order.
func (c Sweep) usable() ([]SweepSeries, []float64) {
	var series []SweepSeries
	var xs []float64
	for _, s := range c.Series {
		pts := slices.DeleteFunc(slices.Clone(s.Points), func(p SweepPoint) bool { return c.LogX && !(p.X > 0) })
		if len(pts) == 0 {
			continue
		}
		series = append(series, SweepSeries{Name: s.Name, Points: pts})
		for _, p := range pts {
			xs = append(xs, p.X)
		}
	}
	slices.Sort(xs)
	return series, slices.Compact(xs)
}

// setX gives p the sweep's X scale, with a labelled tick at each of xs.
func (c Sweep) setX(p *gplot.Plot, xs []float64) {
	format := c.FormatX
	if format == nil {
		format = FormatSI
	}
	p.X.Tick.Marker = valueTicks(xs, format)
	if c.LogX {
		p.X.Scale = gplot.LogScale{}
		p.X.Min, p.X.Max = logRange(xs[0], xs[len(xs)-1])
	}
}

// addSweepLine adds the i'th series to p as (X, y(point)), leaving out
// points with y <= 0 if positive is set, and widens r to the y values
// drawn. It returns the legend thumbnails, or nil if no point was left.
func addSweepLine(p *gplot.Plot, i int, points []SweepPoint, y func(SweepPoint) float64, positive bool, r *valueRange) ([]gplot.Thumbnailer, error) {
	var xys plotter.XYs
	for _, pt := range points {
		if v := y(pt); !positive || v > 0 {
			xys = append(xys, plotter.XY{X: pt.X, Y: v})
			r.add(v)
		}
	}
	if len(xys) == 0 {
		return nil, nil
	}
	return addLine(p, i, xys, true)
}

// valueRange is the range of the values added to it; empty at first.
type valueRange struct {
	lo, hi float64
	n      int
}

func (r *valueRange) add(v float64) {
	if r.n == 0 {
		r.lo, r.hi = v, v
	}
	r.lo, r.hi = math.Min(r.lo, v), math.Max(r.hi, v)
	r.n++
}

// setLogY puts p's Y axis on a log scale around r, with labels by format.
// An empty r gets a range around 1 so the panel is still drawn.
func setLogY(p *gplot.Plot, r valueRange, format func(float64) string) {
	if r.n == 0 {
		r.add(1)
	}
	p.Y.Scale = gplot.LogScale{}
	p.Y.Min, p.Y.Max = logRange(r.lo, r.hi)
	p.Y.Tick.Marker = logTicks{format: format}
}
