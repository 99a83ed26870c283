package bench

import (
	"fmt"
	"io"
	"os"
	"time"
)

// progress writes what the session is doing: on a terminal, one line
// rewritten in place every second; otherwise a plain line every
// plainEvery, which reads well in logs.
type progress struct {
	w   io.Writer // nil: silent
	tty bool
}

const plainEvery = 5 * time.Second

func newProgress(w io.Writer) *progress {
	pr := &progress{w: w}
	if f, ok := w.(*os.File); ok {
		fi, err := f.Stat()
		pr.tty = err == nil && fi.Mode()&os.ModeCharDevice != 0
	}
	return pr
}

// printf writes a line, replacing the live line on a terminal.
func (pr *progress) printf(format string, args ...any) {
	if pr.w == nil {
		return
	}
	if pr.tty {
		fmt.Fprint(pr.w, "\r\033[K")
	}
	fmt.Fprintf(pr.w, format, args...)
}

// monitor samples the workers' completed operations every second, for the
// throughput timeline and the progress line, until stop.
type monitor struct {
	pr      *progress
	p       *plan
	st      settings
	label   string
	workers []*worker
	stopc   chan struct{}
	done    chan []TimePoint
}

func (pr *progress) monitor(p *plan, workers []*worker, st settings, label string) *monitor {
	m := &monitor{pr: pr, p: p, st: st, label: st.w.name + " " + label, workers: workers,
		stopc: make(chan struct{}), done: make(chan []TimePoint, 1)}
	go m.loop()
	return m
}

// stop ends the monitor and returns the timeline.
func (m *monitor) stop() []TimePoint {
	close(m.stopc)
	return <-m.done
}

func (m *monitor) loop() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var tl []TimePoint
	var prevOps int64
	var last float64 // ops/s over the last second
	prev, lastPrint := m.p.start, m.p.start
	for {
		var now time.Time
		select {
		case now = <-tick.C:
		case <-m.stopc:
			now = time.Now()
		}
		ops := m.completed()
		stopping := m.isStopping()
		// A last fraction of a second is too short to rate, unless it is all there is.
		if dt := now.Sub(prev); dt > 100*time.Millisecond || (stopping && len(tl) == 0 && dt > 0) {
			last = float64(ops-prevOps) / dt.Seconds()
			tl = append(tl, TimePoint{T: now.Sub(m.p.start).Seconds(), OpsPerSec: last})
			prev, prevOps = now, ops
		}
		if stopping {
			m.pr.endLine()
			m.done <- tl
			return
		}
		if m.pr.tty || now.Sub(lastPrint) >= plainEvery {
			m.pr.line(m.status(now, ops, last))
			lastPrint = now
		}
	}
}

func (m *monitor) isStopping() bool {
	select {
	case <-m.stopc:
		return true
	default:
		return false
	}
}

// completed returns the operations the workers completed so far.
func (m *monitor) completed() int64 {
	var n int64
	for _, w := range m.workers {
		n += w.done.Load()
	}
	return n
}

// status is the progress line: throughput over the last second, time
// elapsed and what remains.
func (m *monitor) status(now time.Time, ops int64, opsPerSec float64) string {
	phase := ""
	if now.Before(m.p.measure) {
		phase = " (warm-up)"
	}
	s := fmt.Sprintf("%s%s: %.0f ops/s, %d ops, elapsed %v", m.label, phase, opsPerSec, ops, now.Sub(m.p.start).Round(time.Second))
	switch {
	case !m.p.deadline.IsZero():
		s += fmt.Sprintf(", remaining %v", max(m.p.deadline.Sub(now), 0).Round(time.Second))
	case m.st.ops > 0:
		s += fmt.Sprintf(", remaining about %d ops", max(m.st.ops-ops, 0))
	}
	return s
}

// line shows s as the live line, or as a plain line when not on a terminal.
func (pr *progress) line(s string) {
	switch {
	case pr.w == nil:
	case pr.tty:
		fmt.Fprintf(pr.w, "\r\033[K%s", s)
	default:
		fmt.Fprintln(pr.w, s)
	}
}

// endLine clears the live line.
func (pr *progress) endLine() {
	if pr.w != nil && pr.tty {
		fmt.Fprint(pr.w, "\r\033[K")
	}
}
