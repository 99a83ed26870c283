package crashtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/flintkv/flint/client"
	"github.com/flintkv/flint/internal/proctest"
)

const (
	defaultCycles = 20
	workers       = 16
	// snapshotEntries makes the server snapshot every cycle or two, so that
	// crashes also hit snapshots being written and the log being released.
	// (An entry holds every batch that arrived during the write before it.)
	snapshotEntries = 100
	// segmentBytes makes log segments small, so that the log rotates and
	// writes into preallocated segments within a cycle.
	segmentBytes = 256 << 10
	// Bounds on one cycle's load, which the kill normally ends well before.
	maxCallsPerCycle = 200_000
	maxCycleTime     = 30 * time.Second
	// Kill delays, counted from the moment every worker is connected.
	minKillDelay = 50 * time.Millisecond
	maxKillDelay = 300 * time.Millisecond
	// liveness bounds waits for things that should happen promptly: a
	// restart, a verification, a killed process's exit.
	liveness = 20 * time.Second
)

// TestKill9 runs cycles of: start `flint serve` on one data directory, check
// that it holds every acknowledged write, write to it from many clients,
// and kill -9 it while writes are in flight. See the package documentation.
func TestKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("kill -9 cycles with real processes take seconds")
	}
	cycles := envInt(t, "FLINT_CRASH_CYCLES", defaultCycles)
	seed := envSeed(t)
	t.Logf("seed %d, %d cycles (replay: FLINT_CRASH_SEED=%d FLINT_CRASH_CYCLES=%d)", seed, cycles, seed, cycles)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("failed with seed %d; replay: FLINT_CRASH_SEED=%d FLINT_CRASH_CYCLES=%d go test -run TestKill9 -count=1 -v ./internal/crashtest/", seed, seed, cycles)
		}
	})
	start := time.Now()
	tags := os.Getenv("FLINT_CRASH_TAGS") // such as flintbugs, with FLINT_BUGS naming the bugs to inject
	bin := proctest.BuildTags(t, tags)
	t.Logf("built flint (tags %q) in %v", tags, time.Since(start).Round(time.Millisecond))
	h := &harness{t: t, bin: bin, dir: dataDir(t), seed: seed, start: time.Now()}
	for w := range workers {
		h.models = append(h.models, newModel(w))
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	for cycle := 1; cycle <= cycles; cycle++ {
		if cycle%3 == 0 {
			h.killDuringStartup(cycle, rng)
		}
		srv := h.serve()
		h.verify(srv, cycle)
		h.load(srv, cycle, rng)
		h.checkLogs(srv, false)
		h.walSegments()
	}
	// After the last crash: check, stop gracefully, and check again, when
	// nothing may be in doubt.
	srv := h.serve()
	h.verify(srv, cycles+1)
	h.stop(srv)
	h.checkLogs(srv, false)
	srv = h.serve()
	h.verify(srv, cycles+2)
	for _, m := range h.models {
		if m.pending != nil {
			t.Fatalf("worker %d: a call still in doubt after a graceful restart", m.w)
		}
	}
	h.stop(srv)
	h.checkLogs(srv, false)
	h.summary(cycles)
}

// harness runs the cycles and keeps the workers' models between them.
type harness struct {
	t      *testing.T
	bin    string
	dir    string
	seed   uint64
	start  time.Time
	models []*model

	// Totals for the summary.
	restarts                          int
	restartTime                       time.Duration
	snapshots, tornTails, tornStarts  int
	otherWarns                        int
	firstSeg, lastSeg                 uint64
	walBytes                          int64
	resolvedApplied, resolvedNotTaken int
	stalls, quiesced, startupKills    int
}

// serve starts `flint serve` on the data directory and waits until it
// accepts connections.
func (h *harness) serve() *proctest.Server {
	h.t.Helper()
	start := time.Now()
	srv := proctest.Serve(h.t, h.bin, "--dir", h.dir, "--snapshot-entries", strconv.Itoa(snapshotEntries),
		"--segment-bytes", strconv.Itoa(segmentBytes), "--log-level", "info")
	h.restarts++
	h.restartTime += time.Since(start)
	return srv
}

// verify reads every key and checks it against the models; see
// model.resolve. The state found becomes the models' acknowledged state.
//
// It reads twice: at once, and after a write, which commits only after every
// entry that the log held at the restart. Both must find the same state: a
// read must not miss acknowledged writes that the server has not applied yet.
func (h *harness) verify(srv *proctest.Server, cycle int) {
	t := h.t
	first, _, err := read(srv.Addr)
	if err != nil {
		t.Fatalf("cycle %d: reading back after the restart: %v", cycle, err)
	}
	if err := barrier(srv.Addr, cycle); err != nil {
		t.Fatalf("cycle %d: writing after the restart: %v", cycle, err)
	}
	obs, size, err := read(srv.Addr)
	if err != nil {
		t.Fatalf("cycle %d: reading back after the restart: %v", cycle, err)
	}
	models, errs := resolveAll(h.models, obs)
	want := 1 // barrierKey
	for _, m := range models {
		want += m.acked.present()
	}
	if len(errs) == 0 && size != int64(want) {
		errs = append(errs, fmt.Errorf("DBSIZE is %d, but %d keys should exist (the workers' and %s)", size, want, barrierKey))
	}
	if len(errs) > 0 {
		var b strings.Builder
		for _, err := range errs {
			fmt.Fprintf(&b, "\n%v", err)
		}
		t.Fatalf("cycle %d: after kill -9 and restart, the data is wrong:%s", cycle, b.String())
	}
	if d := diff(first, obs); d != "" {
		t.Fatalf("cycle %d: a read right after the restart missed writes that a read after a write saw (a stale read):%s", cycle, d)
	}
	for w, m := range models {
		applied := m.appliedUnknown - h.models[w].appliedUnknown
		h.resolvedApplied += int(applied)
		h.resolvedNotTaken += len(h.models[w].pending) - int(applied)
		h.models[w] = m
	}
}

// barrierKey is written after every restart; see verify.
const barrierKey = "crashtest:barrier"

func barrier(addr string, cycle int) error {
	ctx, cancel := context.WithTimeout(context.Background(), liveness)
	defer cancel()
	c, err := client.New(addr, client.WithPoolSize(1), client.WithDialTimeout(liveness))
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Set(ctx, barrierKey, []byte(strconv.Itoa(cycle)))
}

// diff lists the keys whose values differ between a and b.
func diff(a, b []observed) string {
	var s strings.Builder
	for w := range a {
		for k := range keysPerWorker {
			if !bytes.Equal(a[w].vals[k], b[w].vals[k]) || (a[w].vals[k] == nil) != (b[w].vals[k] == nil) {
				fmt.Fprintf(&s, "\n  %s: first %s, then %s", keyName(w, k), short(a[w].vals[k]), short(b[w].vals[k]))
			}
		}
		if !bytes.Equal(a[w].count, b[w].count) {
			fmt.Fprintf(&s, "\n  %s: first %s, then %s", counterName(w), short(a[w].count), short(b[w].count))
		}
	}
	return s.String()
}

func short(v []byte) string {
	if v == nil {
		return "(nil)"
	}
	if _, _, seq, ok := parseValue(v); ok {
		return fmt.Sprintf("s%d", seq)
	}
	return reply{str: string(v)}.String()
}

// resolveAll resolves copies of models against obs.
func resolveAll(models []*model, obs []observed) ([]*model, []error) {
	var out []*model
	var errs []error
	for w, m := range models {
		c := *m
		if _, err := c.resolve(&obs[w]); err != nil {
			errs = append(errs, err)
		}
		out = append(out, &c)
	}
	return out, errs
}

// read returns what every worker's keys hold, and the number of keys.
func read(addr string) ([]observed, int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), liveness)
	defer cancel()
	c, err := client.New(addr, client.WithPoolSize(1), client.WithDialTimeout(liveness))
	if err != nil {
		return nil, 0, err
	}
	defer c.Close()
	obs := make([]observed, workers)
	keys := make([]string, keysPerWorker+1)
	for w := range workers {
		for k := range keysPerWorker {
			keys[k] = keyName(w, k)
		}
		keys[keysPerWorker] = counterName(w)
		vals, err := c.MGet(ctx, keys...)
		if err != nil {
			return nil, 0, err
		}
		copy(obs[w].vals[:], vals)
		obs[w].count = vals[keysPerWorker]
	}
	v, err := c.Do(ctx, "DBSIZE")
	if err != nil {
		return nil, 0, err
	}
	return obs, v.Int, nil
}

// workerResult is how a worker's load ended.
type workerResult struct {
	err        error // the call that got no reply
	beforeKill bool  // and it failed before the kill was sent
	bad        error // a reply the model contradicts
	exhausted  bool  // it made maxCallsPerCycle calls
}

// load writes from every worker until, after a random delay, the server is
// killed with SIGKILL: while writes are in flight, or in every fourth cycle
// once the workers have stopped and every call has been answered, so that
// the last writes in the log are all acknowledged.
func (h *harness) load(srv *proctest.Server, cycle int, rng *rand.Rand) {
	t := h.t
	delay := minKillDelay + time.Duration(rng.Int64N(int64(maxKillDelay-minKillDelay)+1))
	quiesce := cycle%4 == 0
	ctx, cancel := context.WithTimeout(context.Background(), maxCycleTime)
	defer cancel()
	var stop, killed atomic.Bool
	results := make([]workerResult, workers)
	start := make(chan struct{})
	var ready, done sync.WaitGroup
	ready.Add(workers)
	done.Add(workers)
	callsBefore, opsBefore := make([]int64, workers), make([]int64, workers)
	for w, m := range h.models {
		callsBefore[w], opsBefore[w] = m.calls, m.ops
		wrng := rand.New(rand.NewPCG(h.seed^mix(uint64(cycle)), uint64(w)))
		go func() {
			defer done.Done()
			results[w] = work(ctx, srv.Addr, m, wrng, &ready, start, &stop, &killed)
		}()
	}
	ready.Wait()
	close(start)
	time.Sleep(delay)
	stop.Store(quiesce)
	if quiesce {
		done.Wait()
	}
	killed.Store(true)
	kill9(t, srv)
	cancel()
	done.Wait()
	calls, ops, unknown, stalls := int64(0), int64(0), 0, 0
	for w, r := range results {
		m := h.models[w]
		calls += m.calls - callsBefore[w]
		ops += m.ops - opsBefore[w]
		unknown += len(m.pending)
		var ne interface{ Timeout() bool }
		switch {
		case r.bad != nil:
			t.Errorf("cycle %d, worker %d: %v", cycle, w, r.bad)
		case r.err != nil && r.beforeKill && (errors.Is(r.err, context.DeadlineExceeded) || errors.As(r.err, &ne) && ne.Timeout()):
			stalls++
			t.Logf("cycle %d, worker %d: a call timed out before the kill (a stalled server?): %v", cycle, w, r.err)
		case r.err != nil && r.beforeKill:
			t.Errorf("cycle %d, worker %d: a call failed before the kill: %v", cycle, w, r.err)
		case r.exhausted:
			t.Errorf("cycle %d, worker %d: made %d calls without the kill ending them", cycle, w, maxCallsPerCycle)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	h.stalls += stalls
	how := "while writing"
	switch {
	case quiesce && stalls == 0:
		how = "once every call was answered"
		h.quiesced++
	case quiesce:
		how = "once every call was answered or had timed out"
	}
	t.Logf("cycle %d: killed %s, after %v; %d calls, %d commands acknowledged; %d commands in flight at the kill",
		cycle, how, delay.Round(time.Millisecond), calls, ops, unknown)
}

// work runs one worker's calls until one fails, ctx ends or stop is set.
func work(ctx context.Context, addr string, m *model, rng *rand.Rand, ready *sync.WaitGroup, start <-chan struct{}, stop, killed *atomic.Bool) (res workerResult) {
	s, err := dial(m.w, addr)
	if err == nil {
		pctx, cancel := context.WithTimeout(ctx, callTimeout)
		_, err = s.call(pctx, [][]any{{"PING"}}, false)
		cancel()
	}
	ready.Done()
	if err != nil {
		return workerResult{err: fmt.Errorf("connecting: %w", err), beforeKill: true}
	}
	defer s.Close()
	<-start
	cmds := make([][]any, 0, 32)
	for range maxCallsPerCycle {
		if ctx.Err() != nil || stop.Load() {
			return workerResult{}
		}
		ops, pipelined := m.nextCall(rng)
		cmds = cmds[:0]
		for _, o := range ops {
			cmds = append(cmds, m.args(o))
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		replies, err := s.call(cctx, cmds, pipelined)
		cancel()
		if err != nil {
			// The replies that came before the failure acknowledge
			// their commands; the rest are in doubt.
			if len(replies) > 0 {
				if err := m.acknowledge(ops[:len(replies)], replies); err != nil {
					return workerResult{bad: err}
				}
			}
			m.fail(ops[len(replies):])
			return workerResult{err: err, beforeKill: !killed.Load()}
		}
		if err := m.acknowledge(ops, replies); err != nil {
			return workerResult{bad: err}
		}
	}
	return workerResult{exhausted: true}
}

// killDuringStartup starts `flint serve` and kills it with SIGKILL soon
// after, while it recovers the data directory (truncating a torn tail,
// pruning snapshots, replaying the log) or has just started serving.
func (h *harness) killDuringStartup(cycle int, rng *rand.Rand) {
	t := h.t
	delay := time.Millisecond + time.Duration(rng.Int64N(int64(40*time.Millisecond)))
	srv := &proctest.Server{Addr: proctest.FreeAddr(t), Logs: &proctest.Buffer{}}
	srv.Cmd = exec.Command(h.bin, "serve", "--addr", srv.Addr, "--dir", h.dir,
		"--snapshot-entries", strconv.Itoa(snapshotEntries), "--segment-bytes", strconv.Itoa(segmentBytes), "--log-level", "info")
	srv.Cmd.Stderr = srv.Logs
	if err := srv.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(delay)
	if err := srv.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9: %v", err)
	}
	wait(t, srv)
	if ws, ok := srv.Cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		if proctest.AddrInUse(srv.Logs.String()) { // FreeAddr's address was taken: recovery ran, no kill
			h.checkLogs(srv, true)
			t.Logf("cycle %d: flint serve found %s in use before the kill; no startup kill this cycle:\n%s", cycle, srv.Addr, srv.Logs)
			return
		}
		t.Fatalf("cycle %d: flint serve ended by itself within %v of starting: %v\n%s", cycle, delay, srv.Cmd.ProcessState, srv.Logs)
	}
	h.checkLogs(srv, false)
	h.startupKills++
	t.Logf("cycle %d: killed %v after starting", cycle, delay.Round(100*time.Microsecond))
}

// kill9 kills srv with SIGKILL and checks that the signal is what ended it.
func kill9(t *testing.T, srv *proctest.Server) {
	t.Helper()
	if err := srv.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9: %v", err)
	}
	wait(t, srv)
	ws, ok := srv.Cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("flint serve ended by itself before kill -9: %v", srv.Cmd.ProcessState)
	}
}

// stop stops srv with SIGTERM and checks that it exits cleanly.
func (h *harness) stop(srv *proctest.Server) {
	t := h.t
	t.Helper()
	if err := srv.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	if err := wait(t, srv); err != nil {
		t.Fatalf("flint serve after SIGTERM: %v", err)
	}
	if !strings.Contains(srv.Logs.String(), "stopped") {
		t.Errorf("flint serve did not log that it stopped")
	}
}

// wait waits, for a bounded time, until srv's process has exited.
func wait(t *testing.T, srv *proctest.Server) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- srv.Cmd.Wait() }()
	select {
	case err := <-errc:
		return err
	case <-time.After(liveness):
		t.Fatalf("flint serve (pid %d) has not exited %v after the signal", srv.Cmd.Process.Pid, liveness)
		return nil
	}
}

// checkLogs checks the logs of a server that has exited: every line must be
// slog's, and none may be an error but, if inUse, the one that says the
// server's address was in use, logged after recovery ran. Warnings are
// counted: a kill during a log write leaves a torn tail that the next start
// truncates, and a kill between a spare file's rename into a new segment and
// the write of its header leaves a segment of zeros whose start the next
// start writes again, as expected.
func (h *harness) checkLogs(srv *proctest.Server, inUse bool) {
	t := h.t
	t.Helper()
	for line := range strings.Lines(srv.Logs.String()) {
		line = strings.TrimRight(line, "\n")
		switch {
		case !strings.HasPrefix(line, "time="):
			t.Errorf("flint serve wrote a line that is not a log record: %s", line)
		case strings.Contains(line, " level=ERROR ") && !(inUse && proctest.AddrInUse(line)):
			t.Errorf("flint serve logged an error: %s", line)
		case strings.Contains(line, `msg="snapshot written"`):
			h.snapshots++
		case strings.Contains(line, `msg="wal: truncated a torn write at the end of the log"`):
			h.tornTails++
		case strings.Contains(line, `msg="wal: the start of the last segment was torn`):
			h.tornStarts++ // killed after a spare became the segment, before its header was written
		case strings.Contains(line, " level=WARN "):
			h.otherWarns++
			t.Logf("flint serve warned: %s", line)
		}
	}
}

// walSegments notes the first and last log segments in the data directory,
// to report how many were started and deleted.
func (h *harness) walSegments() {
	names, err := os.ReadDir(filepath.Join(h.dir, "wal"))
	if err != nil {
		h.t.Fatal(err)
	}
	var seqs []uint64
	h.walBytes = 0
	for _, e := range names {
		var seq, first uint64
		if n, _ := fmt.Sscanf(e.Name(), "%016x-%016x.wal", &seq, &first); n == 2 {
			seqs = append(seqs, seq)
			if fi, err := e.Info(); err == nil {
				h.walBytes += fi.Size()
			}
		}
	}
	if len(seqs) == 0 {
		h.t.Fatalf("no log segment in %s", h.dir)
	}
	h.firstSeg, h.lastSeg = slices.Min(seqs), slices.Max(seqs)
}

// minOpsPerCycle is the fewest acknowledged commands a run may average per
// cycle. Runs here average about a thousand; one that checks as few as
// this could pass with a server that stalls every write.
const minOpsPerCycle = 10

// summary logs what the run did, and fails it if it acknowledged fewer
// than minOpsPerCycle commands a cycle.
func (h *harness) summary(cycles int) {
	var calls, ops int64
	for _, m := range h.models {
		calls += m.calls
		ops += m.ops
	}
	if ops < minOpsPerCycle*int64(cycles) {
		h.t.Errorf("only %d commands were acknowledged in %d cycles: the test checked too little", ops, cycles)
	}
	h.t.Logf("%d kill -9 cycles (%d of them once every call was answered, and %d more kills during startup) in %v: %d calls and %d commands acknowledged and verified; "+
		"of the commands in flight at the kills, %d had taken effect and %d had not; "+
		"%d restarts took %v on average; %d snapshots written; %d log segments started and %d deleted (%d MiB of log at the end); "+
		"%d torn log tails truncated; %d segment starts written again; %d other warnings; %d calls timed out",
		cycles, h.quiesced, h.startupKills, time.Since(h.start).Round(time.Millisecond), calls, ops,
		h.resolvedApplied, h.resolvedNotTaken,
		h.restarts, (h.restartTime / time.Duration(h.restarts)).Round(time.Millisecond), h.snapshots,
		h.lastSeg-1, h.firstSeg-1, h.walBytes>>20, h.tornTails, h.tornStarts, h.otherWarns, h.stalls)
}

// dataDir returns a new data directory, removed after the test unless it
// failed, so that a failure's directory can be inspected.
func dataDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "flint-crashtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("data directory kept for inspection: %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	return dir
}

func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

func envSeed(t *testing.T) uint64 {
	s := os.Getenv("FLINT_CRASH_SEED")
	if s == "" {
		return uint64(time.Now().UnixNano())
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("FLINT_CRASH_SEED=%q: want an unsigned integer", s)
	}
	return n
}
