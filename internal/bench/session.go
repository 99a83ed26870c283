package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Run runs what cfg asks for (one run, a comparison or a sweep), prints the
// report on cfg.Stdout and writes the result files into cfg.Out. It returns
// the result even when a run failed; the error then says which. A run that
// found the workload unsupported by its target is not a failure.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	st, err := resolve(cfg)
	if err != nil {
		return nil, err
	}
	s := &session{cfg: cfg, base: st, stdout: cfg.Stdout, progress: newProgress(cfg.Progress)}
	if s.stdout == nil {
		s.stdout = io.Discard
	}
	sw, err := parseSweep(cfg.Sweep, st)
	if err != nil {
		return nil, err
	}
	a, b, err := s.targets()
	if err != nil {
		return nil, err
	}
	defer s.stopSpawned(a)
	res := s.newResult()
	res.Config.Target = a.url // the spawned server's address too
	switch {
	case b != nil:
		s.compare(ctx, res, a, b)
	case sw != nil:
		s.sweep(ctx, res, a, sw)
	default:
		res.Runs = append(res.Runs, s.measure(ctx, a, st, ""))
		s.printRun(res.Runs[0])
	}
	s.printBenchLines(s.stdout, res)
	if err := s.writeFiles(res); err != nil {
		return res, err
	}
	return res, failures(res)
}

// targets parses the targets, naming them for the reports, and spawns the
// local server if asked to.
func (s *session) targets() (a, b *target, err error) {
	if s.cfg.Compare != "" {
		if b, err = parseTarget(s.cfg.Compare); err != nil {
			return nil, nil, err
		}
		b.pid = s.cfg.ComparePID
	}
	if s.cfg.Spawn {
		a, err = s.spawn()
	} else if a, err = parseTarget(s.cfg.Target); err == nil {
		a.pid = s.cfg.ServerPID
	}
	if err != nil {
		return nil, nil, err
	}
	a.name = a.kind
	if b != nil {
		b.name = b.kind
		if a.kind == b.kind {
			a.name, b.name = a.kind+"-A", b.kind+"-B"
		}
	}
	return a, b, nil
}

// spawn starts the local Flint server as a target.
func (s *session) spawn() (*target, error) {
	s.progress.printf("starting flint serve %s\n", strings.Join(s.cfg.SpawnArgs, " "))
	sp, err := spawnFlint(s.cfg.SpawnArgs)
	if err != nil {
		return nil, err
	}
	return &target{url: kindFlint + "://" + sp.addr, kind: kindFlint, addr: sp.addr, pid: sp.cmd.Process.Pid, spawned: sp}, nil
}

func (s *session) stopSpawned(t *target) {
	if t.spawned == nil {
		return
	}
	if err := t.spawned.stop(); err != nil {
		s.progress.printf("%v\n", err)
	}
}

func (s *session) newResult() *Result {
	cfg, st := s.cfg, s.base
	mix := make(map[string]float64)
	for _, k := range st.w.kinds() {
		mix[k.String()] = st.w.mix[k]
	}
	return &Result{
		Version: SchemaVersion, Command: cfg.Command, Started: time.Now(), Machine: machine(),
		Config: ConfigRecord{
			Target: cfg.Target, Spawn: cfg.Spawn, SpawnArgs: cfg.SpawnArgs, ServerPID: cfg.ServerPID,
			Compare: cfg.Compare, ComparePID: cfg.ComparePID, Workload: st.w.name, Mix: mix,
			Distribution: st.dist, Theta: st.theta, Records: st.records, ValueSize: st.valueSize,
			ScanLength: st.scanLength, Duration: st.duration.String(), Ops: st.ops, Warmup: st.warmup.String(),
			Workers: st.workers, Pipeline: st.pipeline, Conns: st.conns, Rate: st.rate, Seed: st.seed, Sweep: cfg.Sweep,
		},
	}
}

// failures returns an error naming the runs that failed, if any.
func failures(res *Result) error {
	var errs []error
	for _, r := range res.Runs {
		if r.Status == StatusFailed {
			errs = append(errs, fmt.Errorf("run %s on %s: %s", cmp.Or(r.Label, "1"), r.Target, r.Error))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("bench: %d of %d runs failed: %w", len(errs), len(res.Runs), errors.Join(errs...))
}
