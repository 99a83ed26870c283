package bench

import (
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latencies are recorded in nanoseconds, from 1 ns to histMax, to 3
// significant digits; a longer latency is recorded as histMax.
const (
	histMax    = int64(time.Hour)
	histDigits = 3
)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, histMax, histDigits) }

// opStats counts the measured operations of one type.
type opStats struct {
	issued int64 // Invariant: issued == acked + errors, once the batch is recorded
	acked  int64
	errors int64
	hist   *hdrhistogram.Histogram // latencies of the acknowledged ones
}

// workerStats is what one worker measured. It belongs to its worker until
// the run ends, then to the runner, which merges them.
type workerStats struct {
	ops      [numOpKinds]opStats
	errKinds map[string]int64 // measured errors by kind
	warmup   int64            // operations completed before measuring began
}

// newWorkerStats allocates histograms for the given types only: at about
// 270 KiB each, one per type per worker adds up.
func newWorkerStats(kinds []opKind) *workerStats {
	s := &workerStats{errKinds: make(map[string]int64)}
	for _, k := range kinds {
		s.ops[k].hist = newHist()
	}
	return s
}

// record counts one measured operation: acknowledged if errKind is "".
func (s *workerStats) record(k opKind, lat time.Duration, errKind string) {
	o := &s.ops[k]
	o.issued++
	if errKind != "" {
		o.errors++
		s.errKinds[errKind]++
		return
	}
	o.acked++
	o.hist.RecordValue(min(max(int64(lat), 0), histMax))
}

// merge adds o's counts into s.
func (s *workerStats) merge(o *workerStats) {
	for k := range s.ops {
		a, b := &s.ops[k], &o.ops[k]
		a.issued += b.issued
		a.acked += b.acked
		a.errors += b.errors
		if b.hist != nil {
			if a.hist == nil {
				a.hist = newHist()
			}
			a.hist.Merge(b.hist)
		}
	}
	for kind, n := range o.errKinds {
		s.errKinds[kind] += n
	}
	s.warmup += o.warmup
}
