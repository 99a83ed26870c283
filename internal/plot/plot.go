// Package plot draws the charts of a benchmark from plain numbers, as PNG or
// SVG files: values over time (TimeSeries), latency distributions
// (LatencyCDF) and results against a swept parameter (Sweep). It knows
// nothing of how the numbers were measured; it owns only how they look.
//
// Every chart has a title, axis labels with units and a legend naming each
// series. Each chart type has a Write method that takes the output file name;
// its extension, .png or .svg, chooses the format. Drawing is done with
// gonum.org/v1/plot.
package plot

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"strings"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

var (
	// ErrFormat is returned for a file name that ends neither in .png nor
	// in .svg.
	ErrFormat = errors.New("plot: file name must end in .png or .svg")
	// ErrNoData is returned for a chart without a single point to draw.
	ErrNoData = errors.New("plot: no data points to draw")
)

// Point is one value of a Series.
type Point struct{ X, Y float64 }

// Series is a named line, drawn through its points in order.
type Series struct {
	Name   string // in the legend
	Points []Point
}

// Chart sizes. At the 96 dots per inch of a PNG, one panel is 864x528 pixels.
const (
	chartWidth  = 9 * vg.Inch
	panelHeight = 5.5 * vg.Inch
)

// newPlot returns an empty chart with a title, axis labels and a grid.
func newPlot(title, xLabel, yLabel string) *gplot.Plot {
	p := gplot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(14)
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.Add(plotter.NewGrid())
	return p
}

// newLegend returns an empty legend in the chart's style.
func newLegend() gplot.Legend {
	l := gplot.NewLegend()
	l.Top, l.Left = true, true
	l.ThumbnailWidth = vg.Points(30)
	l.Padding = vg.Points(2)
	return l
}

// addLine adds one series to p in the i'th colour and dash pattern, with a
// mark on each point if marks is set, and returns its legend thumbnails.
func addLine(p *gplot.Plot, i int, xys plotter.XYs, marks bool) ([]gplot.Thumbnailer, error) {
	l, pts, err := plotter.NewLinePoints(xys)
	if err != nil {
		return nil, err
	}
	l.Color = seriesColor(i)
	l.Width = vg.Points(2)
	l.Dashes = plotutil.Dashes(i / len(plotutil.DarkColors)) // solid until the colours run out
	if !marks {
		p.Add(l)
		return []gplot.Thumbnailer{l}, nil
	}
	pts.Color = l.Color
	pts.Shape = plotutil.Shape(i)
	pts.Radius = vg.Points(3.5)
	p.Add(l, pts)
	return []gplot.Thumbnailer{l, pts}, nil
}

// seriesColor returns a colour that stands out on white, distinct for the
// first seven series.
func seriesColor(i int) color.Color {
	return plotutil.DarkColors[i%len(plotutil.DarkColors)]
}

// save writes panels, stacked top to bottom with their data areas aligned,
// and the legend to the right of the top one, to file in the format its
// extension names. A legend outside the data never hides a line.
func save(file string, legend gplot.Legend, panels ...*gplot.Plot) error {
	format := strings.TrimPrefix(strings.ToLower(filepath.Ext(file)), ".")
	if format != "png" && format != "svg" {
		return fmt.Errorf("%w: %q", ErrFormat, file)
	}
	c, err := draw.NewFormattedCanvas(chartWidth, panelHeight*vg.Length(len(panels)), format)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	dc := draw.New(c)
	gap := vg.Points(12)
	r := legend.Rectangle(dc)
	legendWidth := r.Max.X - r.Min.X
	rows := make([][]*gplot.Plot, len(panels))
	for i, p := range panels {
		rows[i] = []*gplot.Plot{p}
	}
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadY: gap,
		PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: legendWidth + 2*gap}
	canvases := gplot.Align(rows, tiles, dc)
	for i, cv := range canvases {
		panels[i].Draw(cv[0])
	}
	data := panels[0].DataCanvas(canvases[0][0])
	data.Min.X, data.Max.X = data.Max.X+gap, data.Max.X+gap+legendWidth
	legend.Draw(data)
	return writeFile(file, c)
}

// writeFile writes a drawn chart to file.
func writeFile(file string, c io.WriterTo) error {
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	_, err = c.WriteTo(f)
	if err := errors.Join(err, f.Close()); err != nil {
		return fmt.Errorf("plot: writing %s: %w", file, err)
	}
	return nil
}
