package plot

import (
	"math"
	"strconv"
	"time"

	gplot "gonum.org/v1/plot"
)

// FormatSI formats v with at most four significant digits and an SI suffix
// for thousands and up: 950, 1.5k, 120k, 2.25M, 3G. It labels throughput
// ticks, and by default the ticks of a Sweep's parameter.
func FormatSI(v float64) string {
	for _, u := range []struct {
		scale  float64
		suffix string
	}{{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
		if math.Abs(v) >= u.scale {
			return strconv.FormatFloat(v/u.scale, 'g', 4, 64) + u.suffix
		}
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// FormatBytes formats a size in bytes with a binary suffix: 512 B, 4 KiB,
// 1.5 MiB. It suits Sweep.FormatX for value sizes.
func FormatBytes(v float64) string {
	for _, u := range []struct {
		scale  float64
		suffix string
	}{{1 << 40, " TiB"}, {1 << 30, " GiB"}, {1 << 20, " MiB"}, {1 << 10, " KiB"}} {
		if math.Abs(v) >= u.scale {
			return strconv.FormatFloat(v/u.scale, 'g', 4, 64) + u.suffix
		}
	}
	return strconv.FormatFloat(v, 'g', 4, 64) + " B"
}

// linearTicks label 4 to 8 round values on a linear axis: multiples of 1,
// 2, 2.5 or 5 times a power of ten. gonum's default labels as few as two.
type linearTicks struct {
	format func(float64) string
}

func (t linearTicks) Ticks(min, max float64) []gplot.Tick {
	if !(max > min) || math.IsInf(max-min, 0) {
		return nil
	}
	step := roundStep((max - min) / 8)
	first := math.Ceil(min / step)
	var ticks []gplot.Tick
	for i := 0.0; i <= 8; i++ { // bounded: first+i == first for huge first
		v := (first + i) * step
		if v > max {
			break
		}
		ticks = append(ticks, gplot.Tick{Value: v, Label: t.format(v)})
	}
	return ticks
}

// roundStep returns the smallest of 1, 2, 2.5 and 5 times a power of ten
// that is at least x > 0. Consecutive candidates differ by at most twice.
func roundStep(x float64) float64 {
	p := math.Pow10(int(math.Floor(math.Log10(x))))
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

// formatNanos formats nanoseconds as a duration: 250µs, 1.5ms.
func formatNanos(v float64) string { return time.Duration(math.Round(v)).String() }

// formatPlain formats v with at most six significant digits, hiding the
// rounding errors of multiples of a step (0.30000000000000004).
func formatPlain(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

// logTicks mark a log axis at 1..9 times each power of ten. Over four decades
// or more only powers of ten are labelled; fewer also label 2 and 5, and
// less than one labels every mark, so that at least two labels fall inside.
type logTicks struct {
	format func(float64) string
}

func (t logTicks) Ticks(min, max float64) []gplot.Tick {
	if !(min >= 1e-300 && max > min) || math.IsInf(max, 0) { // NaN too; the loop below would never end
		return nil
	}
	decades := math.Log10(max / min)
	var ticks []gplot.Tick
	for p := math.Pow10(int(math.Floor(math.Log10(min)))); p <= max; p *= 10 {
		for m := 1.0; m < 10; m++ {
			tick := gplot.Tick{Value: m * p}
			if m == 1 || decades < 1 || (decades < 4 && (m == 2 || m == 5)) {
				tick.Label = t.format(tick.Value)
			}
			ticks = append(ticks, tick)
		}
	}
	return ticks
}

// logRange returns an axis range around [lo, hi], both > 0, with a margin of
// a tenth of a decade, so that no point sits on the frame.
func logRange(lo, hi float64) (min, max float64) {
	const margin = 1.26 // 10^0.1
	return lo / margin, hi * margin
}

// valueTicks label each of the given values, and nothing else.
func valueTicks(values []float64, format func(float64) string) gplot.ConstantTicks {
	ticks := make(gplot.ConstantTicks, len(values))
	for i, v := range values {
		ticks[i] = gplot.Tick{Value: v, Label: format(v)}
	}
	return ticks
}
