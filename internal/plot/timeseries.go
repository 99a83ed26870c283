package plot

import (
	"fmt"

	"gonum.org/v1/plot/plotter"
)

// TimeSeries is a line chart of values over time, such as the operations
// per second of each second of a run, one line per Series. The X of each
// point is in seconds since the start; both axes start at zero.
type TimeSeries struct {
	Title  string
	YLabel string // what Y is, with its unit: "throughput (ops/s)"
	Series []Series
}

// Write draws the chart into file, a .png or .svg. Y tick labels use SI
// suffixes (120k, 1.5M). Series without points are left out; if none has a
// point Write returns ErrNoData. A point that is not finite is an error.
func (c TimeSeries) Write(file string) error {
	p := newPlot(c.Title, "time since start (s)", c.YLabel)
	legend := newLegend()
	p.X.Min, p.Y.Min = 0, 0
	p.X.Tick.Marker = linearTicks{format: formatPlain}
	p.Y.Tick.Marker = linearTicks{format: FormatSI}
	var n int
	for _, s := range c.Series {
		if len(s.Points) == 0 {
			continue
		}
		xys := make(plotter.XYs, len(s.Points))
		for i, pt := range s.Points {
			xys[i] = plotter.XY{X: pt.X, Y: pt.Y}
		}
		thumbs, err := addLine(p, n, xys, false)
		if err != nil {
			return fmt.Errorf("plot: series %q: %w", s.Name, err)
		}
		legend.Add(s.Name, thumbs...)
		n++
	}
	if n == 0 {
		return ErrNoData
	}
	return save(file, legend, p)
}
