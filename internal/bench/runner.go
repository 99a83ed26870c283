package bench

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"time"

	"github.com/flintkv/flint/internal/procstat"
)

// stopGrace is how long the batches in flight may take to complete once
// the run has ended or been stopped; then they are abandoned, as errors of
// unknown outcome.
const stopGrace = 10 * time.Second

// session is one invocation: its configuration, targets and output.
type session struct {
	cfg      Config
	base     settings
	stdout   io.Writer
	progress *progress
}

// measure runs the workload once against t with settings st and returns
// the run, whatever its status.
func (s *session) measure(ctx context.Context, t *target, st settings, label string) RunResult {
	run := RunResult{Label: label, Target: t.url, TargetKind: t.kind, TargetName: t.name, Spawned: t.spawned != nil, ServerPID: t.pid,
		Params: st.params(), Status: StatusOK}
	be, err := t.open(st.conns)
	if err != nil {
		return run.fail(err)
	}
	defer be.close()
	if err := be.probe(ctx, st.w); err != nil {
		return run.fail(err)
	}
	if run.Load, err = s.load(ctx, t, be, st); err != nil {
		return run.fail(err)
	}
	return s.runPhase(ctx, t, be, st, run)
}

// fail marks the run as failed by err, unsupported, or interrupted.
func (r RunResult) fail(err error) RunResult {
	r.Status, r.Error = StatusFailed, err.Error()
	switch {
	case errors.Is(err, ErrUnsupported):
		r.Status = StatusUnsupported
	case errors.Is(err, context.Canceled):
		r.Status = StatusInterrupted
	}
	return r
}

// load stores the records unless t holds them from an earlier run.
func (s *session) load(ctx context.Context, t *target, be backend, st settings) (*Load, error) {
	if t.kind == kindNull {
		return nil, nil
	}
	k := loadKey{keys: st.w.keys, records: st.records, valueSize: st.valueSize}
	l := &Load{Records: k.records, ValueSize: k.valueSize, Reused: t.loaded == k}
	if l.Reused {
		return l, nil
	}
	s.progress.printf("loading %d records of %d bytes into %s\n", k.records, k.valueSize, t.url)
	start := time.Now()
	t.loaded = loadKey{}
	if err := be.load(ctx, k); err != nil {
		return nil, err
	}
	t.loaded = k
	l.Seconds = time.Since(start).Seconds()
	return l, nil
}

// runPhase runs the workers, samples progress and resources while they
// run, and summarizes what they measured into run.
func (s *session) runPhase(ctx context.Context, t *target, be backend, st settings, run RunResult) RunResult {
	gp, err := st.genParams()
	if err != nil {
		return run.fail(err)
	}
	p := st.plan(time.Now())
	run.Started = p.start
	workers := make([]*worker, st.workers)
	for i := range workers {
		workers[i] = newWorker(newOpGen(gp, i), be.executor(st.w), newWorkerStats(st.w.kinds()), st.pipeline, st.quota(i))
	}
	mon := s.progress.monitor(p, workers, st, t.url)
	sampler := startSampler(p, t.pid)
	err = runWorkers(ctx, p, workers)
	end := time.Now()
	p.stop() // releases the sampler if the run ended before the warm-up did
	run.Timeline = mon.stop()
	res := (<-sampler).Stop()
	run.Resources = &res
	run.summarize(workers, end.Sub(p.measure))
	switch {
	case err != nil:
		run.Status, run.Error = StatusFailed, err.Error()
	case ctx.Err() != nil:
		run.Status = StatusInterrupted
	}
	return run
}

// startSampler starts sampling the driver and the server (if serverPID is
// known) when the warm-up ends, or at once if the run stops sooner.
func startSampler(p *plan, serverPID int) <-chan *procstat.Sampler {
	c := make(chan *procstat.Sampler, 1)
	go func() {
		t := time.NewTimer(time.Until(p.measure))
		defer t.Stop()
		select {
		case <-t.C:
		case <-p.stopped:
		}
		c <- procstat.Start(time.Second, map[string]int{"driver": os.Getpid(), "server": serverPID})
	}()
	return c
}

// runWorkers runs the workers until the plan ends and returns the first
// error of a batch that failed as a whole, which stops the others.
func runWorkers(ctx context.Context, p *plan, workers []*worker) error {
	execCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, len(workers))
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() {
			if err := w.run(execCtx, p); err != nil {
				errc <- err
				p.stop()
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	waitRun(ctx, p, done, cancel)
	close(errc)
	return <-errc
}

// waitRun waits until done is closed. It stops the plan when ctx ends, and
// calls abandon, which fails the batches still in flight, stopGrace after
// the plan stopped or its deadline passed.
func waitRun(ctx context.Context, p *plan, done <-chan struct{}, abandon func()) {
	ctxDone, stopped := ctx.Done(), p.stopped
	var grace <-chan time.Time
	if !p.deadline.IsZero() {
		grace = time.After(time.Until(p.deadline) + stopGrace)
	}
	for {
		select {
		case <-done:
			return
		case <-ctxDone:
			p.stop()
			ctxDone = nil
		case <-stopped:
			grace, stopped = time.After(stopGrace), nil
		case <-grace:
			abandon()
			grace = nil
		}
	}
}
