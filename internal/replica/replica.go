package replica

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/store"
	"github.com/flintkv/flint/internal/vfs"
	"github.com/flintkv/flint/internal/wal"
)

// Options configure a Replica.
type Options struct {
	Dir    string // data directory
	FS     vfs.FS // default vfs.OS
	NoSync bool   // no fsync for each write to the log (benchmarks only): a power loss loses recent writes; segment starts, Open and snapshots fsync still
	// A snapshot is started once SnapshotEntries entries or SnapshotBytes
	// bytes of log have been applied since the last one.
	SnapshotEntries uint64 // default 1,000,000
	SnapshotBytes   int64  // default 256 MiB
	SegmentSize     int64  // log segment size; default 64 MiB
	Preallocate     bool   // write log segments' zeros ahead of time (wal.Options.Preallocate)
	Store           store.Options
	Logger          *slog.Logger // default slog.Default()
}

func (o Options) withDefaults() Options {
	if o.FS == nil {
		o.FS = vfs.OS
	}
	if o.SnapshotEntries == 0 {
		o.SnapshotEntries = 1_000_000
	}
	if o.SnapshotBytes == 0 {
		o.SnapshotBytes = 256 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Errors returned by Apply and ReadBarrier.
var (
	// ErrNoSpace refuses a write because the disk is full. The write did not
	// take effect.
	ErrNoSpace = errors.New("no space left on device: writes are refused until space is freed on the data directory's disk; reads still work")
	// ErrStopped means the replica is closed or has failed. A write that
	// gets it may or may not have taken effect.
	ErrStopped = errors.New("the node is stopping; the write may or may not have taken effect")
	// ErrTooLarge refuses a batch longer than maxBatchBytes. The write did
	// not take effect.
	ErrTooLarge = fmt.Errorf("write too large: the writes pipelined together, or one command's arguments, exceed %d MiB", maxBatchBytes>>20)
)

// maxBatchBytes is the longest batch Apply takes. With the raft loop's
// packing (maxEntryBytes plus one batch) and the log's framing, an entry
// then always fits a log record (frame.MaxLen, 1 GiB), which the log
// checks as well.
const maxBatchBytes = 512 << 20

// The single voter's raft id.
const nodeID = 1

// Replica is one raft group's member on this node: a log, a store, and the
// goroutines that drive them. Its methods are safe for concurrent use.
type Replica struct {
	opt     Options
	st      *store.Store
	storage *raft.MemoryStorage
	wal     *wal.WAL
	voters  []uint64

	propc    chan *proposal
	readc    chan *readWait
	appendc  chan raftpb.Message
	applyc   chan raftpb.Message
	respc    chan []raftpb.Message // storage threads' responses, to the raft loop
	savec    chan *saveRequest     // snapshot requests, to the apply thread
	appliedc chan struct{}         // the apply thread has advanced applied
	dead     chan struct{}         // closed when the replica stops, by Close or a failure
	exited   chan struct{}         // closed once, after dead, the three goroutines have returned
	wg       sync.WaitGroup

	nextID  atomic.Uint64
	waiters waiters
	noSpace atomic.Bool
	// appending counts the messages the raft loop has handed the append
	// thread that it has not finished: while any are, proposals wait.
	appending atomic.Int64
	ready     atomic.Bool // Open has returned the replica
	failed    atomic.Pointer[error]
	dieOnce   sync.Once

	applied atomic.Uint64 // index of the last entry applied to st
	held    []byte        // the apply thread's, only with the injected bug bugs.Reorder
	snaps   snapState
	stats   stats
}

// proposal is one caller's batch waiting to be committed and applied.
type proposal struct {
	id      uint64
	batch   []byte                        // the caller's; read only until the raft loop copies it
	done    func(i int, res store.Result) // the caller's, called on the apply thread
	err     error
	applied chan struct{} // closed when the batch is applied or refused (err)
}

// waiters holds the proposals in the log, or about to be, by id, until
// the apply thread takes them. A map under a mutex rather than a sync.Map,
// which allocates for every key it stores: every id is stored once, taken
// once, and never read again.
type waiters struct {
	mu sync.Mutex
	m  map[uint64]*proposal
}

func (w *waiters) add(p *proposal) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = make(map[uint64]*proposal)
	}
	w.m[p.id] = p
}

// take removes and returns the proposal with this id, or nil if there is
// none: it was proposed before a restart, or refused.
func (w *waiters) take(id uint64) *proposal {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.m[id]
	delete(w.m, id)
	return p
}

// readWait is one caller waiting for a read barrier.
type readWait struct {
	err  error
	done chan struct{}
}

// Open recovers the replica in opt.Dir (creating it if needed), starts it,
// and returns once it can serve: it leads its group and has applied
// everything the log holds. To lead, it writes a new term to the log; and
// recovery may have to write first, to make the data directories and
// bootstrap a new one, start the log, start a new segment after a log that
// ends before the snapshot (--fsync never), or write again the torn start
// of its last segment. Any of these writes that finds the disk full makes
// Open log why it waits, and wait until space is freed. It cannot serve
// reads before: entries it does not know are committed may have been
// acknowledged before the restart, and only its own first entry commits
// them.
func Open(opt Options) (*Replica, error) {
	opt = opt.withDefaults()
	r := &Replica{opt: opt,
		propc: make(chan *proposal, 1024), readc: make(chan *readWait, 1024),
		appendc: make(chan raftpb.Message, 1024), applyc: make(chan raftpb.Message, 1024),
		respc: make(chan []raftpb.Message, 1024), appliedc: make(chan struct{}, 1), savec: make(chan *saveRequest),
		dead: make(chan struct{}), exited: make(chan struct{})}
	var seed [8]byte
	rand.Read(seed[:])
	r.nextID.Store(binary.LittleEndian.Uint64(seed[:]) >> 1)
	start := time.Now()
	if err := r.recover(); err != nil {
		return nil, err
	}
	if err := r.start(); err != nil {
		r.wal.Close()
		return nil, err
	}
	if err := r.ReadBarrier(); err != nil {
		r.Close()
		return nil, err
	}
	r.ready.Store(true)
	r.opt.Logger.Info("replica ready", "dir", opt.Dir, "applied", r.applied.Load(),
		"keys", r.st.Len(), "took", time.Since(start).Round(time.Millisecond))
	return r, nil
}

func (r *Replica) snapDir() string { return path.Join(r.opt.Dir, "snap") }
func (r *Replica) walDir() string  { return path.Join(r.opt.Dir, "wal") }

// Store returns the state machine that reads are served from.
func (r *Replica) Store() *store.Store { return r.st }

// Apply proposes batch and returns once it is committed and applied. done
// is called on the apply thread after each entry takes effect. A batch that
// does not decode is refused with an error wrapping store.ErrBadEntry, and
// nothing is logged; an empty one needs no log entry and returns nil at
// once. See server.Backend.
func (r *Replica) Apply(batch []byte, done func(i int, res store.Result)) error {
	if err := r.Err(); err != nil {
		return ErrStopped
	}
	if r.noSpace.Load() {
		return ErrNoSpace
	}
	if len(batch) > maxBatchBytes {
		return ErrTooLarge
	}
	if len(batch) == 0 {
		return nil
	}
	// Once logged, a batch that the store cannot apply would stop the
	// node, and again at every restart.
	if err := store.CheckBatch(batch); err != nil {
		return fmt.Errorf("replica: batch refused, not logged: %w", err)
	}
	p := &proposal{batch: batch, done: done, applied: make(chan struct{})}
	if !call(r, r.propc, p, p.applied) {
		return ErrStopped
	}
	return p.err
}

// ReadBarrier returns once the store reflects every write committed before
// the call.
func (r *Replica) ReadBarrier() error {
	w := &readWait{done: make(chan struct{})}
	if !call(r, r.readc, w, w.done) {
		return ErrStopped
	}
	return w.err
}

// call hands req to one of the replica's goroutines over c and waits until
// that goroutine closes done. It returns false if the replica stops first,
// but only once its goroutines have returned: until then they may still
// take req from c, read the caller's batch, or run its done callback, so
// the caller could not yet reuse what req points to.
func call[T any](r *Replica, c chan<- T, req T, done <-chan struct{}) bool {
	select {
	case c <- req:
	case <-r.exited:
		return false
	}
	select {
	case <-done:
		return true
	case <-r.exited:
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
}

// Err returns the error that stopped the replica, or nil while it runs.
func (r *Replica) Err() error {
	if p := r.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// ErrClosed is what Err returns once Close, not a failure, stopped the
// replica.
var ErrClosed = errors.New("replica: closed")

// Dead is closed when the replica stops serving, after Close or a failure;
// Err then says why: ErrClosed, or the failure.
func (r *Replica) Dead() <-chan struct{} { return r.dead }

// fail stops the replica because of err: writes may no longer be
// acknowledged. It is called for errors the node cannot recover from, such
// as a failed fsync.
func (r *Replica) fail(err error) {
	r.dieOnce.Do(func() {
		r.failed.Store(&err)
		r.opt.Logger.Error("replica failed; it refuses all further reads and writes", "err", err)
		close(r.dead)
	})
}

// Close stops the replica. Writes still waiting get ErrStopped and may or
// may not have taken effect.
func (r *Replica) Close() error {
	r.dieOnce.Do(func() {
		err := ErrClosed
		r.failed.Store(&err)
		close(r.dead)
	})
	r.wg.Wait()
	r.snaps.wait()
	return r.wal.Close()
}

// errorf formats an error of this package.
func errorf(format string, args ...any) error { return fmt.Errorf("replica: "+format, args...) }
