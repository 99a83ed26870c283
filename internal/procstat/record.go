package procstat

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"
)

// maxErrors bounds Report.Errors: a file that cannot be parsed fails the
// same way at every reading.
const maxErrors = 10

// recorder holds the readings of one Sampler. It is not safe for concurrent
// use; the Sampler hands it from goroutine to goroutine.
type recorder struct {
	root     string
	pageSize int64
	procs    map[string]*procTrack
	busy     counter // machine CPU ticks not idle
	total    counter // machine CPU ticks
	cores    int
	rx, tx   counter // loopback bytes
	readings int
	samples  []Sample
	errs     errorLog
}

// procTrack is the history of one named process.
type procTrack struct {
	pid       int
	startTime uint64 // from its first reading
	ticks     counter
	peakRSS   int64
	exited    bool // Invariant: no reading is taken once set.
}

func newRecorder(root string) *recorder {
	return &recorder{root: root, pageSize: int64(os.Getpagesize()), procs: make(map[string]*procTrack)}
}

// sample takes one reading at elapsed seconds since Start. The first reading
// only sets the baselines; later ones are appended to the time series.
func (r *recorder) sample(elapsed float64, pids map[string]int) {
	s := Sample{ElapsedSeconds: elapsed, Procs: make(map[string]ProcSample)}
	for name, pid := range pids {
		if ps, ok := r.sampleProc(elapsed, name, pid); ok {
			s.Procs[name] = ps
		}
	}
	s.CPUBusy = r.sampleCPU(elapsed)
	s.LoopbackRxBytesPerSec, s.LoopbackTxBytesPerSec = r.sampleLoopback(elapsed)
	if r.readings++; r.readings > 1 {
		r.samples = append(r.samples, s)
	}
}

// sampleProc reads one process. ok is false unless the reading is its
// second or later.
func (r *recorder) sampleProc(elapsed float64, name string, pid int) (ps ProcSample, ok bool) {
	t := r.procs[name]
	if t == nil {
		t = &procTrack{pid: pid}
		r.procs[name] = t
	}
	if t.exited {
		return ProcSample{}, false
	}
	st, rss, err := r.readProc(pid)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH):
		t.exited = true
		return ProcSample{}, false
	case err != nil:
		r.errs.add(fmt.Errorf("%s (pid %d): %w", name, pid, err))
		return ProcSample{}, false
	case t.ticks.n > 0 && st.startTime != t.startTime:
		t.exited = true // the pid now belongs to another process
		return ProcSample{}, false
	}
	t.startTime = st.startTime
	t.ticks.add(elapsed, st.cpuTicks)
	t.peakRSS = max(t.peakRSS, rss)
	t.exited = st.state == 'Z' || st.state == 'X'
	dv, dt := t.ticks.step()
	ps = ProcSample{CPUSeconds: t.ticks.cpuSeconds(), Cores: perSecond(dv, dt) / clockTicks, RSSBytes: rss}
	return ps, t.ticks.n > 1
}

// readProc reads the stat and statm files of pid; rss is in bytes.
func (r *recorder) readProc(pid int) (st procStat, rss int64, err error) {
	dir := filepath.Join(r.root, strconv.Itoa(pid))
	b, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return procStat{}, 0, err
	}
	if st, err = parseStat(b); err != nil {
		return procStat{}, 0, err
	}
	if b, err = os.ReadFile(filepath.Join(dir, "statm")); err != nil {
		return procStat{}, 0, err
	}
	pages, err := parseStatm(b)
	return st, int64(pages) * r.pageSize, err
}

// sampleCPU reads /proc/stat and returns the busy fraction since the
// previous reading.
func (r *recorder) sampleCPU(elapsed float64) float64 {
	c, err := readParse(r, "stat", parseCPU)
	if err != nil {
		return 0
	}
	r.busy.add(elapsed, c.busy)
	r.total.add(elapsed, c.total)
	r.cores = c.cores
	busy, _ := r.busy.step()
	total, _ := r.total.step()
	return fraction(busy, total)
}

// sampleLoopback reads /proc/net/dev and returns the loopback bytes per
// second received and sent since the previous reading.
func (r *recorder) sampleLoopback(elapsed float64) (rxRate, txRate float64) {
	type rxtx struct{ rx, tx uint64 }
	c, err := readParse(r, "net/dev", func(b []byte) (rxtx, error) {
		rx, tx, err := parseNetDev(b, "lo")
		return rxtx{rx, tx}, err
	})
	if err != nil {
		return 0, 0
	}
	r.rx.add(elapsed, c.rx)
	r.tx.add(elapsed, c.tx)
	return perSecond(r.rx.step()), perSecond(r.tx.step())
}

// readParse reads a file under the root and parses it, recording any error.
func readParse[T any](r *recorder, name string, parse func([]byte) (T, error)) (T, error) {
	b, err := os.ReadFile(filepath.Join(r.root, name))
	var v T
	if err == nil {
		v, err = parse(b)
	}
	if err != nil {
		r.errs.add(err)
	}
	return v, err
}

// report summarizes the readings.
func (r *recorder) report(interval time.Duration) Report {
	rep := Report{
		IntervalSeconds: interval.Seconds(),
		Procs:           make(map[string]ProcReport, len(r.procs)),
		Cores:           r.cores,
		Samples:         r.samples,
		Errors:          r.errs.first,
		ErrorCount:      r.errs.count,
	}
	busy, _ := r.busy.span()
	total, _ := r.total.span()
	rep.CPUBusy = fraction(busy, total)
	rep.LoopbackRxBytesPerSec = perSecond(r.rx.span())
	rep.LoopbackTxBytesPerSec = perSecond(r.tx.span())
	rep.ElapsedSeconds = max(r.total.last.at, r.rx.last.at)
	for name, t := range r.procs {
		rep.Procs[name] = t.report()
		rep.ElapsedSeconds = max(rep.ElapsedSeconds, t.ticks.last.at)
	}
	return rep
}

func (t *procTrack) report() ProcReport {
	return ProcReport{
		PID:          t.pid,
		CPUSeconds:   t.ticks.cpuSeconds(),
		MeanCores:    perSecond(t.ticks.span()) / clockTicks,
		PeakRSSBytes: t.peakRSS,
		Readings:     t.ticks.n,
		Exited:       t.exited,
	}
}

// counter follows a cumulative counter through its readings.
type counter struct {
	n                 int // readings so far
	first, prev, last reading
}

type reading struct {
	at float64 // seconds since Start
	v  uint64
}

func (c *counter) add(at float64, v uint64) {
	r := reading{at, v}
	if c.n == 0 {
		c.first, c.last = r, r
	}
	c.prev, c.last = c.last, r
	c.n++
}

// step returns the increase and the seconds since the previous reading.
func (c *counter) step() (dv uint64, dt float64) { return delta(c.prev, c.last) }

// span returns the increase and the seconds since the first reading.
func (c *counter) span() (dv uint64, dt float64) { return delta(c.first, c.last) }

// delta is b - a, or 0 if the counter went backwards (it was reset).
func delta(a, b reading) (uint64, float64) {
	if b.v < a.v {
		return 0, b.at - a.at
	}
	return b.v - a.v, b.at - a.at
}

func perSecond(dv uint64, dt float64) float64 {
	if dt <= 0 {
		return 0
	}
	return float64(dv) / dt
}

func fraction(part, whole uint64) float64 {
	if whole == 0 {
		return 0
	}
	return float64(part) / float64(whole)
}

// cpuSeconds converts the span of a counter of CPU ticks to seconds.
func (c *counter) cpuSeconds() float64 {
	dv, _ := c.span()
	return float64(dv) / clockTicks
}

// errorLog keeps the first distinct errors and counts them all.
type errorLog struct {
	first []string
	count int
}

func (l *errorLog) add(err error) {
	l.count++
	msg := err.Error()
	if len(l.first) < maxErrors && !slices.Contains(l.first, msg) {
		l.first = append(l.first, msg)
	}
}
