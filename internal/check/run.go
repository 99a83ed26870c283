package check

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// finalReadTimeout bounds the final reads, which wait for a server that
// was just restarted.
const finalReadTimeout = 30 * time.Second

// Run records a history from cfg.Clients clients running the workload
// against the server (started by Run itself if cfg.Spawn, and then hit by
// cfg.Nemesis), reads every key once more at the end, and checks the
// history. It writes a summary to cfg.Stdout and files to cfg.Out.
//
// It returns an error only when there is no history to check (a bad
// configuration, a server that would not start). Trouble later (the server
// did not come back after a kill, the final reads failed) is Result.Err,
// and the history recorded so far is still checked.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.Seed == 0 {
		cfg.Seed = rand.Uint64()
	}
	r := &run{cfg: cfg, rec: newRecorder(), addrs: []string{cfg.Addr}}
	if err := r.setUp(); err != nil {
		return nil, err
	}
	defer r.cleanUp()
	fmt.Fprintf(cfg.Stdout, "flint check: %s\n", r.describe())
	runErr := r.execute(ctx)
	h := r.rec.history(header{Command: cfg.Command, Seed: cfg.Seed, Clients: cfg.Clients + cfg.Readers, Keys: r.layout.universe()})
	saved := ""
	if cfg.Out != "" {
		saved = filepath.Join(cfg.Out, "history.json")
		if err := h.save(saved); err != nil {
			runErr = errors.Join(runErr, fmt.Errorf("check: saving the history: %w", err))
			saved = ""
		}
	}
	res, err := check(h, cfg.CheckTimeout)
	if err != nil {
		return nil, err // the history is the workload's own: this is a bug
	}
	res.Err, res.notSent = runErr, r.notSent.Load()
	r.passed = res.Verdict == Pass && res.Err == nil
	res.report(cfg, saved)
	return res, nil
}

// Recheck checks the history in file path again, as Run checks the history
// it records, and reports the same way (cfg gives CheckTimeout, Out and
// Stdout).
func Recheck(path string, cfg Config) (*Result, error) {
	cfg = cfg.withOutputDefaults()
	h, err := loadHistory(path)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(cfg.Stdout, "flint check --recheck %s: recorded by %q, seed %d\n", path, h.Command, h.Seed)
	res, err := check(h, cfg.CheckTimeout)
	if err != nil {
		return nil, err
	}
	if cfg.Out != "" {
		if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
			return nil, err
		}
	}
	res.report(cfg, "")
	return res, nil
}

// run is the state of one Run.
type run struct {
	cfg     Config
	rec     *recorder
	layout  layout
	addrs   []string // the servers' client addresses
	fl      *fleet   // nil unless cfg.Spawn
	dir     string   // the spawned servers' directory: data and logs
	notSent atomic.Int64
	passed  bool // whether the check passed, so the data directory can go
}

// setUp creates the output directory and starts the server if asked to.
func (r *run) setUp() error {
	// The keys' prefix is new for every run, so that the store holds none
	// of them at the start, even a server that ran checks before.
	r.layout = newLayout(fmt.Sprintf("t%08x/", rand.Uint32()), r.cfg.Clients, r.cfg.Keys, r.cfg.Conflict, r.cfg.Groups)
	if r.cfg.Out != "" {
		if err := os.MkdirAll(r.cfg.Out, 0o755); err != nil {
			return fmt.Errorf("check: %w", err)
		}
	}
	if !r.cfg.Spawn {
		return nil
	}
	var err error
	if r.cfg.Out != "" {
		r.dir = filepath.Join(r.cfg.Out, "server")
		err = errors.Join(os.RemoveAll(r.dir), os.Mkdir(r.dir, 0o755))
	} else {
		r.dir, err = os.MkdirTemp("", "flint-check-")
	}
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	bin := r.cfg.Binary
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return fmt.Errorf("%w: finding this binary to spawn: %w", ErrServer, err)
		}
	}
	r.fl, err = startFleet(r.cfg, bin, r.dir)
	if err != nil {
		r.cleanUp()
		return err
	}
	r.addrs = r.fl.addrs()
	return nil
}

// cleanUp removes the servers' directory unless it is in cfg.Out; there it
// keeps the logs, and the data too unless the check passed.
func (r *run) cleanUp() {
	switch {
	case r.dir == "":
	case r.cfg.Out == "":
		os.RemoveAll(r.dir)
	case r.passed:
		datas, _ := filepath.Glob(filepath.Join(r.dir, "*", "data"))
		inGroups, _ := filepath.Glob(filepath.Join(r.dir, "*", "*", "data"))
		for _, d := range append(append(datas, inGroups...), filepath.Join(r.dir, "data")) {
			os.RemoveAll(d)
		}
	}
}

func (r *run) describe() string {
	c := r.cfg
	keys := fmt.Sprintf("%d keys per client", c.Keys)
	if c.Conflict {
		keys = fmt.Sprintf("%d keys shared", c.Keys)
	}
	target := "server " + r.addrs[0]
	switch {
	case c.Spawn && c.Out != "" && r.fl.sharded():
		target = fmt.Sprintf("%s\n  logs in %s", r.fl.describe(), r.dir)
	case c.Spawn && c.Out != "":
		target = fmt.Sprintf("%s, logs in %s", r.fl.describe(), r.dir)
	case c.Spawn:
		target = r.fl.describe()
	}
	nemesis := "none"
	if len(c.Nemesis) > 0 {
		nemesis = fmt.Sprintf("%v every ~%v", c.Nemesis, c.NemesisInterval)
	}
	clients := fmt.Sprintf("%d clients", c.Clients)
	if c.Readers > 0 {
		clients += fmt.Sprintf(" and %d readers of followers", c.Readers)
	}
	return fmt.Sprintf("%s, %s, mix %s, nemesis %s, seed %d\n  %s", clients, keys, c.Mix, nemesis, c.Seed, target)
}

// execute runs the workload and the nemesis, then the final crash (if the
// nemesis kills) and the final reads, and stops the servers.
func (r *run) execute(ctx context.Context) error {
	var nem *nemesis
	if r.fl != nil {
		nem = &nemesis{fl: r.fl, faults: r.cfg.Nemesis, interval: r.cfg.NemesisInterval,
			pauseMax: 2 * r.cfg.OpTimeout, rng: rand.New(rand.NewPCG(r.cfg.Seed, 1<<32)), rec: r.rec, log: r.cfg.Log,
			hot: r.layout.slots()}
	}
	err := r.workload(ctx, nem)
	if err == nil && slices.ContainsFunc(r.cfg.Nemesis, killing) {
		err = nem.finalKill()
	}
	if err == nil {
		err = r.finalReads()
	}
	if r.fl != nil {
		err = errors.Join(err, r.fl.stop())
	}
	return err
}

// killing reports whether f kills servers.
func killing(f Fault) bool { return f == FaultKill || f == FaultKillLeader || f == FaultWipe }

// workload runs the clients, and the nemesis if there is one, until the
// duration is over or the operations are done.
func (r *run) workload(ctx context.Context, nem *nemesis) error {
	if r.cfg.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.cfg.Duration)
		defer cancel()
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	callers := make([]caller, r.cfg.Clients, r.cfg.Clients+r.cfg.Readers)
	for c := range callers {
		s, err := r.newSession()
		if err != nil {
			return fmt.Errorf("check: client %d: %w", c, err)
		}
		defer s.close()
		callers[c] = s
	}
	for i := range r.cfg.Readers {
		f := &follower{addr: r.addrs[i%len(r.addrs)], timeout: r.cfg.OpTimeout}
		defer f.close()
		callers = append(callers, f)
	}
	var budget *atomic.Int64 // operations left to record; nil: no limit
	if r.cfg.Ops > 0 {
		budget = new(atomic.Int64)
		budget.Store(int64(r.cfg.Ops))
	}
	nemErr := make(chan error, 1)
	if nem != nil && len(nem.faults) > 0 {
		go func() { nemErr <- nem.run(ctx) }()
	} else {
		nemErr <- nil
	}
	var wg sync.WaitGroup
	for c, s := range callers {
		gen := newGenerator(r.cfg.Seed, c, r.layout.groups[c%r.cfg.Clients], r.cfg.Mix)
		if c >= r.cfg.Clients {
			gen = newGenerator(r.cfg.Seed, c, r.layout.groups[c%r.cfg.Clients], Mix{kindGet: 1})
		}
		wg.Go(func() { r.client(ctx, c, s, gen, budget) })
	}
	wg.Wait()
	stop() // the operations may be done before the duration is over
	err := <-nemErr
	if err == nil && r.fl != nil {
		err = r.fl.exited()
	}
	return err
}

// client is one workload client: one operation at a time until ctx ends or
// the budget is spent. An operation in flight when ctx ends still gets its
// timeout, so that its outcome is known if it can be.
func (r *run) client(ctx context.Context, id int, s caller, gen *generator, budget *atomic.Int64) {
	for ctx.Err() == nil && (budget == nil || budget.Add(-1) >= 0) {
		cmd := gen.next()
		call := r.rec.now()
		rep, out, err := s.do(context.WithoutCancel(ctx), cmd)
		o := op{Client: id, Call: call, Return: r.rec.now(), Cmd: cmd, Reply: rep}
		switch out {
		case notSent: // the server is down: nothing happened; wait a little
			r.notSent.Add(1)
			if budget != nil {
				budget.Add(1)
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
			continue
		case unknown:
			o.Unknown = err.Error()
		}
		r.rec.addOp(o)
		gen.observe(cmd, rep)
	}
}

// finalReads reads every key of the run once more, as client
// Clients+Readers,
// retrying each until it gets a reply (the server may have just
// restarted).
func (r *run) finalReads() error {
	s, err := r.newSession()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrFinalRead, err)
	}
	defer s.close()
	deadline := time.Now().Add(finalReadTimeout)
	for _, key := range r.layout.universe() {
		for {
			cmd := []string{"GET", key}
			call := r.rec.now()
			rep, out, err := s.do(context.Background(), cmd)
			if out == replied && rep.kind != replyErr {
				r.rec.addOp(op{Client: r.cfg.Clients + r.cfg.Readers, Call: call, Return: r.rec.now(), Cmd: cmd, Reply: rep, Final: true})
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%w: GET %s: %v %v", ErrFinalRead, key, rep, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// newSession returns a client of the servers, as the configuration asks.
func (r *run) newSession() (*session, error) {
	addrs := r.addrs
	if r.fl != nil {
		addrs = r.fl.addrs() // members change
	}
	return newSession(addrs, r.cfg.OpTimeout, r.cfg.Sessions)
}
