package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// plan is what the workers of a run share. It is read-only once they
// start, but for stop.
type plan struct {
	start    time.Time
	measure  time.Time     // end of the warm-up: operations due from then on are measured
	deadline time.Time     // no operation is sent from then on; zero: none
	pipeline int           // the most operations per batch
	interval time.Duration // open loop: between one worker's intended sends; 0: closed loop

	stopOnce sync.Once
	stopped  chan struct{} // closed by stop
}

// stop makes the workers send no more batches; those in flight complete.
func (p *plan) stop() { p.stopOnce.Do(func() { close(p.stopped) }) }

func (p *plan) isStopped() bool {
	select {
	case <-p.stopped:
		return true
	default:
		return false
	}
}

// worker generates operations and runs them, one batch at a time, in the
// order generated.
type worker struct {
	gen      *opGen
	ex       executor
	stats    *workerStats
	ops      []op
	res      []string
	quota    int64        // measured operations to send; < 0: no limit
	sent     int64        // operations sent, warm-up included
	measured int64        // measured operations sent
	done     atomic.Int64 // operations completed, warm-up included; read by the progress sampler
}

func newWorker(gen *opGen, ex executor, stats *workerStats, pipeline int, quota int64) *worker {
	return &worker{gen: gen, ex: ex, stats: stats, ops: make([]op, pipeline), res: make([]string, pipeline), quota: quota}
}

// run sends batches until the plan ends or a batch fails as a whole, which
// it returns.
func (w *worker) run(ctx context.Context, p *plan) error {
	for {
		n, at := w.next(p)
		if n == 0 {
			return nil
		}
		for i := range n {
			w.ops[i] = w.gen.next()
		}
		sent := time.Now()
		err := w.ex.exec(ctx, w.ops[:n], w.res[:n])
		w.record(n, at, sent, time.Now(), err, p)
		if err != nil {
			return err
		}
	}
}

// next returns the size of the next batch, 0 at the end of the run, and
// the time it was decided, which places a closed-loop batch in the warm-up
// or the measurement as its size was chosen.
func (w *worker) next(p *plan) (int, time.Time) {
	if p.interval > 0 {
		return w.nextOpen(p)
	}
	now := time.Now()
	if p.isStopped() || (!p.deadline.IsZero() && !now.Before(p.deadline)) {
		return 0, now
	}
	n := int64(p.pipeline)
	if w.quota >= 0 && !now.Before(p.measure) {
		n = min(n, w.quota-w.measured)
	}
	return int(max(n, 0)), now
}

// nextOpen waits until the next operation is due and returns how many are
// due by then, at most a pipeline's worth. Operation i of a worker is due
// at start + i*interval whether or not the server kept up, so latency is
// measured from when the operation should have been sent, not from when a
// slow server let the worker send it (coordinated omission).
func (w *worker) nextOpen(p *plan) (int, time.Time) {
	due := p.at(w.sent)
	if !p.deadline.IsZero() && !due.Before(p.deadline) {
		return 0, due
	}
	if d := time.Until(due); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-p.stopped:
			return 0, due
		}
	}
	if p.isStopped() {
		return 0, due
	}
	n := min(int64(p.pipeline), int64(time.Since(p.start)/p.interval)+1-w.sent)
	if !p.deadline.IsZero() {
		n = min(n, p.index(p.deadline)-w.sent)
	}
	if w.quota >= 0 {
		n = min(n, p.index(p.measure)+w.quota-w.sent)
	}
	return int(max(n, 0)), due
}

// at returns when operation i of a worker is due, in the open loop.
func (p *plan) at(i int64) time.Time { return p.start.Add(time.Duration(i) * p.interval) }

// index returns the number of a worker's operations due before t.
func (p *plan) index(t time.Time) int64 {
	d := t.Sub(p.start)
	return int64((d + p.interval - 1) / p.interval)
}

// record counts a batch of n operations, decided at at, sent at sent and
// completed at end. err, if set, failed the whole batch. In the closed loop
// latency counts from the send; in the open loop, from when each operation
// was due.
func (w *worker) record(n int, at, sent, end time.Time, err error, p *plan) {
	for i := range n {
		if p.interval > 0 {
			at = p.at(w.sent + int64(i))
			sent = at
		}
		if at.Before(p.measure) {
			w.stats.warmup++
			continue
		}
		w.measured++
		kind := w.res[i]
		if err != nil {
			kind = batchErrKind(err)
		}
		w.stats.record(w.ops[i].kind, end.Sub(sent), kind)
	}
	w.sent += int64(n)
	w.done.Add(int64(n))
}
