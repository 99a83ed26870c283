package replica

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"log/slog"
	"path"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/raftlog"
	"github.com/flintkv/flint/internal/store"
	"github.com/flintkv/flint/internal/transport"
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
	// HoldProcessor makes the log keep its goroutine's processor through
	// each fsync (see vfs.SyncHeld), for a process that gave the scheduler
	// one processor more for it. It is the process's choice, not this
	// replica's: see package node.
	HoldProcessor bool
	// PauseGC, if set, is called before a snapshot is loaded or the log
	// replayed, and what it returns once that is done: the process may turn
	// its collector off meanwhile, since a collection would only mark the
	// growing store again and again (a third of the load time for 4 GiB).
	// A replica sets no process-wide state itself.
	PauseGC func() (resume func())

	// The group. The zero values make a group of one voter, this member.
	ID     uint64   // this member's raft id; default 1. Never reused for another member.
	Group  uint64   // the group's id in the peers' frames; default 1
	Voters []uint64 // the voters of a new group: the same list on every first member; default [ID]
	// Join makes a new data directory wait to be added to an existing
	// group (as a learner, see AddMember) rather than start one with Voters.
	Join bool
	// Peers carries raft messages to the other members; needed with more
	// than one voter. Messages from them come in through Step (and the
	// other methods of transport.Handler, which Replica implements).
	Peers transport.Sender
	// Members is what the node knows of each first voter (its addresses,
	// say), kept with the group's configuration: see Replica.Members.
	Members map[uint64][]byte
	// Incarnation names this data directory among all that ever ran this
	// member: a random number, not 0, made with the directory and kept
	// with it. A member registers it with its group, which refuses a new
	// directory under a used id (see incarnation.go). 0: no registration.
	Incarnation uint64
	// Raft's clock: a tick every TickInterval (default 100 ms); a follower
	// that hears no leader for ElectionTicks (default 10) to twice that
	// campaigns; a leader sends heartbeats every HeartbeatTicks (default 1).
	TickInterval                  time.Duration
	ElectionTicks, HeartbeatTicks int
	// LeaderWait is how long writes and reads wait while this member knows
	// no leader before they fail with ErrNoLeader; default two election
	// timeouts.
	LeaderWait time.Duration
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
	if o.PauseGC == nil {
		o.PauseGC = func() func() { return func() {} }
	}
	setDefault(&o.ID, soloID)
	setDefault(&o.Group, 1)
	if len(o.Voters) == 0 {
		o.Voters = []uint64{o.ID}
	}
	setDefault(&o.TickInterval, 100*time.Millisecond)
	setDefault(&o.ElectionTicks, 10)
	setDefault(&o.HeartbeatTicks, 1)
	setDefault(&o.LeaderWait, 2*time.Duration(o.ElectionTicks)*o.TickInterval)
	return o
}

func setDefault[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}

// maxBatchBytes is the longest batch Apply takes. With the raft loop's
// packing (maxEntryBytes plus one batch) and the log's framing, an entry
// then always fits a log record (frame.MaxLen, 1 GiB), which the log
// checks as well.
const maxBatchBytes = 512 << 20

// soloID is the member id of a group's first voter.
const soloID = 1

// Replica is one raft group's member on this node: a log, a store, and the
// goroutines that drive them. Its methods are safe for concurrent use.
type Replica struct {
	opt     Options
	id      uint64                      // this member's raft id
	st      atomic.Pointer[store.Store] // replaced whole when a leader's snapshot is installed
	storage *raftlog.Storage
	wal     *wal.WAL
	conf    raftpb.ConfState // the configuration applied; the apply thread's once started

	propc      chan *proposal
	readc      chan *readWait
	appendc    chan raftpb.Message
	applyc     chan raftpb.Message
	respc      chan []raftpb.Message // storage threads' responses, to the raft loop
	savec      chan *saveRequest     // snapshot requests, to the apply thread
	recvc      chan raftpb.Message   // messages from other members, to the raft loop
	recvBytes  atomic.Int64          // the data of the entries of the messages in recvc
	reportc    chan report           // what the transport reports of other members, to the raft loop
	confc      chan confRequest      // membership changes and transfers to propose, to the raft loop
	confApplyc chan confApply        // committed changes, from the apply thread to the raft loop
	statusc    chan chan raft.Status // status requests, to the raft loop
	changing   atomic.Bool           // a change made through this member is in progress
	snapWanted atomic.Bool           // snapshotSoon has a request on its way
	membersMu  sync.Mutex
	members    map[uint64][]byte // member info (see Members); replaced whole, never changed
	appliedc   chan struct{}     // the apply thread has advanced applied
	dead       chan struct{}     // closed when the replica stops, by Close or a failure
	exited     chan struct{}     // closed once, after dead, the three goroutines have returned
	wg         sync.WaitGroup

	nextID  atomic.Uint64
	waiters waiters
	noSpace atomic.Bool
	// appending counts the messages the raft loop has handed the append
	// thread that it has not finished: while any are, proposals wait.
	appending atomic.Int64
	// appendBytes is the size of the entries in those messages (see
	// entryBytes); appendRoom holds a token once the append thread has
	// written some, for handAppend. Invariant: appendBytes <=
	// maxAppendBytes, unless a single message counts more on its own.
	appendBytes atomic.Int64
	appendRoom  chan struct{}
	ready       atomic.Bool // Open has returned the replica
	failed      atomic.Pointer[error]
	dieOnce     sync.Once

	lead    atomic.Uint64 // the member that leads, as the raft loop last heard, or raft.None
	applied atomic.Uint64 // index of the last entry applied to st
	held    []byte        // the apply thread's, only with the injected bug bugs.Reorder
	early   []earlyEntry  // the apply thread's, only with the injected bug bugs.AckEarly; by index
	snaps   snapState
	stats   stats

	snapRetries snapshotRetries // when to report failed snapshot streams to raft
	registered  atomic.Bool     // the group knows this member by this directory's incarnation
	// incarnations is what the group knows of each member's data
	// directory (see incarnation.go). It is under membersMu, with
	// members, and replaced whole.
	incarnations map[uint64]incarnation
}

// proposal is one caller's batch waiting to be committed and applied.
type proposal struct {
	id    uint64                        // names it in the log: see newID
	batch []byte                        // the caller's; read only until the raft loop copies it
	done  func(i int, res store.Result) // the caller's, called on the apply thread
	// state moves from pending to claimed to proposed (by the raft loop,
	// which copies batch in between), or from pending to abandoned (by a
	// caller that gave up before it was claimed).
	state   atomic.Int32
	err     error
	applied chan struct{} // closed when the batch is applied or refused (err)
}

// proposal states.
const (
	pending   = iota // on its way to the raft loop, or held by it
	claimed          // being copied into a raft entry by the raft loop
	proposed         // copied, and in waiters
	abandoned        // its caller gave up before it was claimed: never proposed
)

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

// fail completes every proposal with err and forgets them.
func (w *waiters) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, p := range w.m {
		p.err = err
		close(p.applied)
		delete(w.m, id)
	}
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
	if len(opt.Voters) > 1 && opt.Peers == nil {
		return nil, errorf("a group of %d voters needs Options.Peers", len(opt.Voters))
	}
	r := &Replica{opt: opt, id: opt.ID, recvc: make(chan raftpb.Message, recvQueue), reportc: make(chan report, 64),
		confc: make(chan confRequest), confApplyc: make(chan confApply), statusc: make(chan chan raft.Status),
		propc: make(chan *proposal, 1024), readc: make(chan *readWait, 1024),
		appendc: make(chan raftpb.Message, 1024), applyc: make(chan raftpb.Message, 1024),
		respc: make(chan []raftpb.Message, 1024), appliedc: make(chan struct{}, 1), savec: make(chan *saveRequest), appendRoom: make(chan struct{}, 1),
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
	// A sole voter leads at once, and serves once its term's first entry
	// commits the log; a member of a larger group serves through whichever
	// member leads, once there is one (see ReadBarrier).
	if r.solo() {
		if err := r.ReadBarrier(context.Background()); err != nil {
			r.Close()
			return nil, err
		}
	}
	r.ready.Store(true)
	r.opt.Logger.Info("replica ready", "dir", opt.Dir, "applied", r.applied.Load(),
		"keys", r.Store().Len(), "took", time.Since(start).Round(time.Millisecond))
	return r, nil
}

func (r *Replica) snapDir() string { return path.Join(r.opt.Dir, "snap") }
func (r *Replica) walDir() string  { return path.Join(r.opt.Dir, "wal") }

// Store returns the state machine that reads are served from.
//
// Hold it only for one read: installing a snapshot sent by the leader
// replaces it (the one held stays as it was, a state at least as recent as
// the read barrier before it).
func (r *Replica) Store() *store.Store { return r.st.Load() }

// Apply proposes batch and returns once it is committed and applied. done
// is called on the apply thread after each entry takes effect. A batch that
// does not decode is refused with an error wrapping store.ErrBadEntry, and
// nothing is logged; an empty one needs no log entry and returns nil at
// once. Every other error matches one of the classes in errors.go. If ctx
// ends first, Apply returns at once (the apply thread then calls done no
// more), with ctx's error, wrapped with ErrOutcomeUnknown if the batch was
// proposed, else with ErrNoLeader (errors.go). At a member removed from its group it fails with ErrNotLeader
// (wrapping ErrRemoved): nothing is proposed there. See server.Backend.
func (r *Replica) Apply(ctx context.Context, batch []byte, done func(i int, res store.Result)) error {
	if err := r.Err(); err != nil {
		return refusal(err)
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
	p := &proposal{id: r.newID(), batch: batch, done: done, applied: make(chan struct{})}
	select {
	case r.propc <- p:
	case <-r.exited:
		return errStopped
	case <-ctx.Done():
		return gaveUp(ErrNoLeader, ctx.Err())
	}
	return r.await(ctx, p)
}

// await waits until p is applied or refused, the replica stops, or ctx
// ends, when the caller gives p up (see abandon).
func (r *Replica) await(ctx context.Context, p *proposal) error {
	select {
	case <-p.applied:
		return p.err
	case <-r.exited:
		return r.stoppedWith(p.applied, &p.err)
	case <-ctx.Done():
		return r.abandon(p, ctx.Err())
	}
}

// newID returns a new proposal id: this member's id in the high 32 bits,
// so that no two members' ids meet in one log, and a counter in the low
// ones, which starts at a random value at every start, so that entries
// proposed before a restart never complete a new caller.
func (r *Replica) newID() uint64 { return r.id<<32 | r.nextID.Add(1)&(1<<32-1) }

// abandon is Apply's caller giving up on p because cause ended its
// context. Once it returns, neither the raft loop nor the apply thread
// touches the caller's batch or calls its done: an abandoned proposal is
// never proposed, and a proposed one taken from waiters is never
// completed.
func (r *Replica) abandon(p *proposal, cause error) error {
	if p.state.CompareAndSwap(pending, abandoned) {
		return gaveUp(ErrNoLeader, cause) // never proposed
	}
	for p.state.Load() == claimed { // the raft loop is copying the batch
		runtime.Gosched()
	}
	if r.waiters.take(p.id) != nil {
		return gaveUp(ErrOutcomeUnknown, cause)
	}
	// The apply thread, or a loss of leadership, took it: either completes
	// it at once.
	select {
	case <-p.applied:
		return p.err
	case <-r.exited:
		return r.stoppedWith(p.applied, &p.err)
	}
}

// stoppedWith returns the error of a request that the replica's goroutines,
// now all returned, left as it was: its own, if they completed it (closed
// done), else errStopped.
func (r *Replica) stoppedWith(done <-chan struct{}, err *error) error {
	select {
	case <-done:
		return *err
	default:
		return errStopped
	}
}

// ReadBarrier returns once the store reflects every write committed before
// the call: the group's commit index then, which this member learns from
// the leader (raft's read index), is applied. With no leader it waits for
// one until ctx ends; its errors are ErrNoLeader, with ctx's, errStopped,
// or ErrNotLeader at a member removed from its group.
func (r *Replica) ReadBarrier(ctx context.Context) error {
	if err := r.Err(); err != nil {
		return refusal(err)
	}
	w := &readWait{done: make(chan struct{})}
	select {
	case r.readc <- w:
	case <-r.exited:
		return errStopped
	case <-ctx.Done():
		return gaveUp(ErrNoLeader, ctx.Err())
	}
	select {
	case <-w.done:
		return w.err
	case <-r.exited:
		return r.stoppedWith(w.done, &w.err)
	case <-ctx.Done():
		// The raft loop may still complete w; nobody reads it then.
		return gaveUp(ErrNoLeader, ctx.Err())
	}
}

// call hands req to one of the replica's goroutines over c and waits until
// that goroutine closes done. It returns false if the replica stops first,
// but only once its goroutines have returned: until then they may still
// take req from c or complete it.
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

// Leader returns the id of the member that leads the group, as far as this
// member knows, or 0 if it knows none.
func (r *Replica) Leader() uint64 { return r.lead.Load() }

// Err returns the error that stopped the replica, or nil while it runs.
func (r *Replica) Err() error {
	if p := r.failed.Load(); p != nil {
		return *p
	}
	return nil
}

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

// Close stops the replica. Writes still waiting get ErrOutcomeUnknown
// (ErrStopped).
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
