package plot

import (
	"errors"
	"flag"
	"image"
	_ "image/png" // for image.DecodeConfig
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// To look at the charts: go test ./internal/plot -run Chart -args -samples /tmp/plot-samples
var samplesDir = flag.String("samples", "", "also write each sample chart, as PNG and SVG, into this directory")

// sampleTimeSeries is a 30-second run of two servers at about 180k and 240k ops/s.
func sampleTimeSeries() TimeSeries {
	rng := rand.New(rand.NewPCG(1, 2))
	c := TimeSeries{Title: "cs6450-b, 8 workers, pipeline 16: throughput per second", YLabel: "throughput (ops/s)"}
	for _, s := range []struct {
		name string
		rate float64
	}{{"flint", 240e3}, {"redis", 180e3}} {
		var pts []Point
		for t := 1; t <= 30; t++ {
			pts = append(pts, Point{X: float64(t), Y: s.rate * (0.9 + 0.2*rng.Float64())})
		}
		c.Series = append(c.Series, Series{Name: s.name, Points: pts})
	}
	return c
}

// sampleCDF is the distribution of log-normal latencies around a median.
func sampleCDF() LatencyCDF {
	rng := rand.New(rand.NewPCG(3, 4))
	c := LatencyCDF{Title: "cs6450-b: latency per operation"}
	for _, s := range []struct {
		name   string
		median time.Duration
	}{{"GET", 80 * time.Microsecond}, {"SET", 200 * time.Microsecond}} {
		lat := make([]float64, 100000)
		for i := range lat {
			lat[i] = float64(s.median) * math.Exp(0.6*rng.NormFloat64())
		}
		c.Series = append(c.Series, LatencySeries{Name: s.name, Points: cumulative(lat)})
	}
	return c
}

// cumulative returns the empirical CDF of lat at 200 log-spaced latencies.
func cumulative(lat []float64) []LatencyPoint {
	slices.Sort(lat)
	lo, hi := lat[0], lat[len(lat)-1]
	var pts []LatencyPoint
	for i, j := 0, 0; i <= 200; i++ {
		v := lo * math.Pow(hi/lo, float64(i)/200)
		for j < len(lat) && lat[j] <= v*(1+1e-12) {
			j++
		}
		pts = append(pts, LatencyPoint{Latency: time.Duration(v), Fraction: float64(j) / float64(len(lat))})
	}
	return pts
}

// sampleSweep is a client-count sweep of two servers.
func sampleSweep() Sweep {
	c := Sweep{Title: "cs6450-b: client sweep, pipeline 1", XLabel: "clients", LogX: true}
	for _, s := range []struct {
		name    string
		peak    float64
		latency time.Duration
	}{{"flint", 250e3, 60 * time.Microsecond}, {"redis", 190e3, 50 * time.Microsecond}} {
		var pts []SweepPoint
		for clients := 1.0; clients <= 64; clients *= 2 {
			tput := s.peak * clients / (clients + 6)
			pts = append(pts, SweepPoint{X: clients, Throughput: tput, P99: time.Duration(float64(s.latency) * (1 + clients/2))})
		}
		c.Series = append(c.Series, SweepSeries{Name: s.name, Points: pts})
	}
	return c
}

type writer interface{ Write(file string) error }

func TestChart(t *testing.T) {
	for _, tc := range []struct {
		name   string
		chart  writer
		height int
	}{
		{"timeseries", sampleTimeSeries(), 528},
		{"cdf", sampleCDF(), 528},
		{"sweep", sampleSweep(), 2 * 528},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), tc.name+".png")
			if err := tc.chart.Write(file); err != nil {
				t.Fatal(err)
			}
			checkPNG(t, file, 864, tc.height)
			writeSamples(t, tc.name, tc.chart)
		})
	}
}

func checkPNG(t *testing.T, file string, width, height int) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, format, err := image.DecodeConfig(f)
	if err != nil || format != "png" || cfg.Width != width || cfg.Height != height {
		t.Errorf("%s: %s %dx%d, %v; want png %dx%d", file, format, cfg.Width, cfg.Height, err, width, height)
	}
}

func writeSamples(t *testing.T, name string, c writer) {
	if *samplesDir == "" {
		return
	}
	if err := os.MkdirAll(*samplesDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{".png", ".svg"} {
		if err := c.Write(filepath.Join(*samplesDir, name+ext)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSVG(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cdf.SVG")
	if err := sampleCDF().Write(file); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil || !strings.Contains(string(b), "<svg") {
		t.Errorf("%s is not an SVG file (%v)", file, err)
	}
}

func TestWriteErrors(t *testing.T) {
	dir := t.TempDir()
	nan := TimeSeries{Series: []Series{{Name: "bad", Points: []Point{{1, math.NaN()}}}}}
	for _, tc := range []struct {
		name  string
		chart writer
		file  string
		want  error
	}{
		{"format", sampleTimeSeries(), "x.pdf", ErrFormat},
		{"no series", TimeSeries{}, "x.png", ErrNoData},
		{"empty series", LatencyCDF{Series: []LatencySeries{{Name: "GET"}}}, "x.png", ErrNoData},
		{"zero latency only", LatencyCDF{Series: []LatencySeries{{Name: "GET", Points: []LatencyPoint{{0, 1}}}}}, "x.png", ErrNoData},
		{"log x of zero", Sweep{LogX: true, Series: []SweepSeries{{Name: "a", Points: []SweepPoint{{X: 0}}}}}, "x.png", ErrNoData},
		{"NaN", nan, "x.png", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.chart.Write(filepath.Join(dir, tc.file))
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Errorf("Write = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestEdgeCases draws charts with a single point, equal values or odd
// fractions: each must come out as a picture, not a panic or an error. SVG
// exercises the same drawing code as PNG, many times faster under -race.
func TestEdgeCases(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name  string
		chart writer
	}{
		{"one point", TimeSeries{Series: []Series{{Name: "a", Points: []Point{{1, 5}}}}}},
		{"one latency", LatencyCDF{Series: []LatencySeries{{Name: "GET", Points: []LatencyPoint{{time.Millisecond, 1}}}}}},
		{"fractions out of range", LatencyCDF{Series: []LatencySeries{{Name: "GET", Points: []LatencyPoint{
			{time.Microsecond, -0.5}, {time.Millisecond, 0.9999999999}, {time.Second, 1.5}}}}}},
		{"one sweep point", Sweep{LogX: true, Series: []SweepSeries{{Name: "a", Points: []SweepPoint{{1, 100, time.Millisecond}}}}}},
		{"no p99", Sweep{FormatX: FormatBytes, Series: []SweepSeries{{Name: "a", Points: []SweepPoint{{512, 100, 0}, {4096, 90, 0}}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.chart.Write(filepath.Join(dir, "x.svg")); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		v         float64
		si, bytes string
	}{
		{0, "0", "0 B"},
		{950, "950", "950 B"},
		{1500, "1.5k", "1.465 KiB"},
		{4096, "4.096k", "4 KiB"},
		{250e3, "250k", "244.1 KiB"},
		{1 << 20, "1.049M", "1 MiB"},
		{4 << 20, "4.194M", "4 MiB"},
		{2.25e9, "2.25G", "2.095 GiB"},
	} {
		if got := FormatSI(tc.v); got != tc.si {
			t.Errorf("FormatSI(%v) = %q, want %q", tc.v, got, tc.si)
		}
		if got := FormatBytes(tc.v); got != tc.bytes {
			t.Errorf("FormatBytes(%v) = %q, want %q", tc.v, got, tc.bytes)
		}
	}
}
