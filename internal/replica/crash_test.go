package replica

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/flintkv/flint/internal/store"
	"github.com/flintkv/flint/internal/vfs"
)

// TestCrashRecovery runs random writes from concurrent writers, stops them
// with a crash, restarts, and checks the state against a model of what was
// acknowledged: every acknowledged batch is there, and each writer's one
// unacknowledged batch is there entirely or not at all. A crash comes after
// a random number of filesystem operations or a random time, whichever is
// first, so it may come during recovery too. It is a power loss (dropping
// everything not fsynced, keeping random torn prefixes) or, a third of the
// time, a kill: the process stops, and what it wrote stays for the next
// one, until a later power loss drops what was not fsynced.
// FLINT_CRASH_SEED replays a run.
func TestCrashRecovery(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("FLINT_CRASH_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (FLINT_CRASH_SEED=%d replays it)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	rounds := 20
	if testing.Short() {
		rounds = 4
	}
	var acked, landed, lost, kills, inRecovery int
	for round := range rounds {
		c := &crashRun{t: t, rng: rand.New(rand.NewPCG(rng.Uint64(), uint64(round))), mem: vfs.NewMem()}
		for life := range 6 {
			c.live(fmt.Sprintf("round %d life %d", round, life))
		}
		acked, landed, lost = acked+c.acked, landed+c.landed, lost+c.lost
		kills, inRecovery = kills+c.kills, inRecovery+c.inRecovery
	}
	t.Logf("%d acknowledged batches survived; of the batches in flight at a crash, %d landed and %d did not; "+
		"%d crashes were kills, %d crashes came during recovery", acked, landed, lost, kills, inRecovery)
	if acked == 0 || landed+lost == 0 || kills == 0 || inRecovery == 0 {
		t.Fatal("the crashes tested too little: no acknowledged or in-flight writes, no kill, or none during recovery")
	}
}

// TestKilledBootstrap kills the first process on a new directory right
// after it renamed its bootstrap snapshot into place, before it synced the
// snapshot directory. The next process must make that name durable before
// it acknowledges writes: a power loss would otherwise leave a log with no
// snapshot, which does not start.
func TestKilledBootstrap(t *testing.T) {
	mem := vfs.NewMem()
	renamed := false
	gate := &gateFS{fs: mem, stopAt: math.MaxInt64, stopBefore: func(op, name string) bool {
		renamed = renamed || (op == "Rename" && path.Dir(name) == "data/snap")
		return renamed && op == "SyncDir" && name == "data/snap"
	}}
	if _, err := Open(Options{FS: gate, Dir: "data", Logger: quiet()}); err == nil || !gate.stopped() {
		t.Fatalf("the first process was not killed before it synced the snapshot directory: %v", err)
	}
	r := open(t, mem, Options{})
	set(t, r, "k", "acknowledged")
	r = restartAfterPowerLoss(t, r, mem)
	defer r.Close()
	if got := get(t, r, "k"); got != "acknowledged" {
		t.Fatalf("k = %s after a power loss, want the acknowledged value", got)
	}
}

// crashRun is one filesystem through several crashes.
type crashRun struct {
	t     *testing.T
	rng   *rand.Rand
	mem   *vfs.Mem
	state map[string]string // the model: every key's value after the acknowledged writes
	// pendings are the batches in flight at the last crash: each took
	// effect entirely or not at all.
	pendings []opBatch
	// Counts for the report: acknowledged batches, in-flight ones that took
	// effect or did not, crashes that were kills, and crashes that came
	// before Open returned.
	acked, landed, lost, kills, inRecovery int
}

const crashWriters = 4

// writerLog is what one writer did in one life.
type writerLog struct {
	acked   []opBatch
	pending opBatch // sent, outcome unknown; nil if none
}

// op is one command of a batch: a SET (del false) or a DEL.
type op struct {
	key, val string
	del      bool
}

type opBatch []op

// live opens the replica, verifies the state it recovered, and writes until
// a random crash.
func (c *crashRun) live(name string) {
	gate := &gateFS{fs: c.mem, rng: rand.New(rand.NewPCG(c.rng.Uint64(), 2)),
		powerLoss: c.rng.IntN(3) != 0, stopAt: 1 + c.rng.Int64N(maxOpsBeforeCrash)}
	if !gate.powerLoss {
		c.kills++
	}
	opt := Options{FS: gate, Dir: "data", SnapshotEntries: uint64(10 + c.rng.IntN(40)), SegmentSize: int64(1 << (9 + c.rng.IntN(4))), Preallocate: c.rng.IntN(2) == 0, Logger: quiet()}
	r, err := Open(opt)
	if err != nil && gate.stopped() {
		c.inRecovery++ // the next life recovers again, and verifies
		return
	}
	if err != nil {
		c.t.Fatalf("%s: reopening after a crash: %v", name, err)
	}
	c.verify(name, r, gate)
	logs := make([]writerLog, crashWriters)
	var wg sync.WaitGroup
	for w := range crashWriters {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			write(r, w, rand.New(rand.NewPCG(seed, 1)), &logs[w])
		}(c.rng.Uint64())
	}
	time.Sleep(time.Duration(c.rng.IntN(30)) * time.Millisecond)
	gate.stop() // unless the operations ran out first
	r.Close()
	wg.Wait()
	c.expect(logs)
}

// maxOpsBeforeCrash bounds the filesystem operations a process makes before
// it crashes. Opening the replica makes a few dozen, and every group of
// writes two, so crashes land in recovery as well as in writing.
const maxOpsBeforeCrash = 400

// write sends random batches of writes on the writer's own keys until the
// replica stops.
func write(r *Replica, w int, rng *rand.Rand, log *writerLog) {
	var b store.Batch
	for seq := 0; seq < 100000; seq++ {
		ops := make(opBatch, 1+rng.IntN(4))
		b.Reset()
		for i := range ops {
			k := fmt.Sprintf("w%d-k%d", w, rng.IntN(6))
			if rng.IntN(5) == 0 {
				ops[i] = op{key: k, del: true}
				b.Add(store.OpDel, 0, []byte(k))
			} else {
				ops[i] = op{key: k, val: fmt.Sprintf("w%d-%d-%d", w, seq, i)}
				b.Add(store.OpSet, 0, []byte(k), []byte(ops[i].val))
			}
		}
		log.pending = ops
		if err := r.Apply(context.Background(), b.Bytes(), nil); err != nil {
			return
		}
		log.acked, log.pending = append(log.acked, ops), nil
	}
}

// expect advances the model by the acknowledged batches and remembers the
// pending ones, which verify resolves.
func (c *crashRun) expect(logs []writerLog) {
	if c.state == nil {
		c.state = map[string]string{}
	}
	c.pendings = c.pendings[:0]
	for _, l := range logs {
		for _, b := range l.acked {
			c.state = b.applyTo(c.state)
		}
		c.acked += len(l.acked)
		if l.pending != nil {
			c.pendings = append(c.pendings, l.pending)
		}
	}
}

func (b opBatch) applyTo(m map[string]string) map[string]string {
	for _, o := range b {
		if o.del {
			delete(m, o.key)
		} else {
			m[o.key] = o.val
		}
	}
	return m
}

// verify checks the replica's state against the model: each pending batch
// took effect entirely or not at all (writers own disjoint keys, so each is
// decided on its own keys). A replica that crashed since Open returned has
// still applied all that its log held: Open waited for that.
func (c *crashRun) verify(name string, r *Replica, gate *gateFS) {
	if err := r.ReadBarrier(context.Background()); err != nil && !gate.stopped() {
		c.t.Fatal(err)
	}
	got := map[string]string{}
	r.Store().Snapshot().Ascend(func(k string, v []byte) bool { got[k] = string(v); return true })
	want := cloneState(c.state)
	for _, p := range c.pendings {
		with := p.applyTo(cloneState(want))
		if matchesOn(got, with, p) && !matchesOn(got, want, p) {
			want = with
			c.landed++
		} else {
			c.lost++
		}
	}
	if len(got) != len(want) {
		c.t.Fatalf("%s: %d keys after restart, want %d\ngot  %v\nwant %v", name, len(got), len(want), got, want)
	}
	for k, v := range want {
		if got[k] != v {
			c.t.Fatalf("%s: %s = %q after restart, want %q (acknowledged writes lost or a batch half applied)", name, k, got[k], v)
		}
	}
	c.state = want
}

// matchesOn reports whether got and want agree on the keys batch b writes.
func matchesOn(got, want map[string]string, b opBatch) bool {
	for _, o := range b {
		g, gok := got[o.key]
		w, wok := want[o.key]
		if g != w || gok != wok {
			return false
		}
	}
	return true
}

func cloneState(m map[string]string) map[string]string {
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// gateFS passes operations to fs until the process stops: before operation
// stopAt+1, before an operation stopBefore picks, or at stop, whichever is
// first. Every operation after fails: a crashed process does nothing more
// to the disk. Stopping is atomic with respect to the operations, which run
// one at a time.
type gateFS struct {
	fs        *vfs.Mem
	rng       *rand.Rand // for the power loss
	powerLoss bool       // the stop is a power loss; if not, a kill, which leaves fs as it is
	stopAt    int64
	// stopBefore, if not nil, is asked before each operation, named as
	// the FS method is and given the path it works on.
	stopBefore func(op, name string) bool

	mu   sync.Mutex
	ops  int64 // operations so far
	dead bool
}

var errCrashed = errors.New("process crashed")

// stop stops the process, if it runs.
func (g *gateFS) stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopLocked()
}

func (g *gateFS) stopLocked() {
	if g.dead {
		return
	}
	g.dead = true
	switch {
	case !g.powerLoss:
	case g.rng.IntN(2) == 0:
		g.fs.CrashWith(g.rng)
	default:
		g.fs.CrashSectors(g.rng) // a disk that writes sectors out of order
	}
}

// stopped reports whether the process has stopped.
func (g *gateFS) stopped() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.dead
}

// do runs fn, operation op on name, unless the process has stopped,
// stopping it first if fn is the operation after stopAt or one that
// stopBefore picks.
func (g *gateFS) do(op, name string, fn func() error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ops++; g.ops > g.stopAt || (g.stopBefore != nil && g.stopBefore(op, name)) {
		g.stopLocked()
	}
	if g.dead {
		return errCrashed
	}
	return fn()
}

func (g *gateFS) Create(name string) (f vfs.File, err error) {
	err = g.do("Create", name, func() (e error) { f, e = g.fs.Create(name); return })
	return g.file(f, name), err
}

func (g *gateFS) Open(name string) (f vfs.File, err error) {
	err = g.do("Open", name, func() (e error) { f, e = g.fs.Open(name); return })
	return g.file(f, name), err
}

func (g *gateFS) OpenRW(name string) (f vfs.File, err error) {
	err = g.do("OpenRW", name, func() (e error) { f, e = g.fs.OpenRW(name); return })
	return g.file(f, name), err
}

func (g *gateFS) Rename(o, n string) error {
	return g.do("Rename", n, func() error { return g.fs.Rename(o, n) })
}
func (g *gateFS) Remove(name string) error {
	return g.do("Remove", name, func() error { return g.fs.Remove(name) })
}
func (g *gateFS) Mkdir(dir string) error {
	return g.do("Mkdir", dir, func() error { return g.fs.Mkdir(dir) })
}
func (g *gateFS) SyncDir(dir string) error {
	return g.do("SyncDir", dir, func() error { return g.fs.SyncDir(dir) })
}

func (g *gateFS) ReadDir(dir string) (names []string, err error) {
	err = g.do("ReadDir", dir, func() (e error) { names, e = g.fs.ReadDir(dir); return })
	return names, err
}

func (g *gateFS) file(f vfs.File, name string) vfs.File {
	if f == nil {
		return nil
	}
	return &gateFile{File: f, g: g, name: name}
}

// gateFile is a file of a gateFS: its writes and syncs stop at the crash.
// (Mem makes handles from before a crash stale anyway; the gate makes the
// operation and the crash atomic.)
type gateFile struct {
	vfs.File
	g    *gateFS
	name string
}

func (f *gateFile) WriteAt(p []byte, off int64) (n int, err error) {
	err = f.g.do("WriteAt", f.name, func() (e error) { n, e = f.File.WriteAt(p, off); return })
	return n, err
}

func (f *gateFile) Sync() error { return f.g.do("Sync", f.name, f.File.Sync) }
func (f *gateFile) Truncate(size int64) error {
	return f.g.do("Truncate", f.name, func() error { return f.File.Truncate(size) })
}
