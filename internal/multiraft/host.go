package multiraft

import (
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/raftlog"
	"github.com/flintkv/flint/internal/transport"
	"github.com/flintkv/flint/internal/vfs"
	"github.com/flintkv/flint/internal/wal"
)

// StateMachine is a group's state, which its committed entries change. A
// Host calls Apply from one goroutine at a time for a group, the group's
// apply goroutine, in log order, once per entry since the state was made
// or last restored (after a restart, from the group's first entry, or
// from the first after its newest snapshot: see the package doc); what it
// returns goes to the proposer, if on this node.
type StateMachine interface {
	Apply(index uint64, data []byte) any
}

// Snapshotter is implemented by a StateMachine whose groups take snapshots
// (if Config.SnapDir is set): such a group writes its state to a snapshot file now and then, releases
// its log up to there, restores the state from its newest snapshot when
// it starts, and sends its snapshot to a member too far behind for its
// log (see the package doc). A group whose StateMachine is not a
// Snapshotter keeps its whole log. The host calls Restore on the group's
// apply goroutine too, never while a write of the group runs, and never
// calls a write captured before a Restore after it.
type Snapshotter interface {
	// Snapshot captures the state as of the last entry applied. It is called on the group's apply goroutine and must be cheap; write, called later on another goroutine while Apply goes on, writes that state.
	Snapshot() (write func(w io.Writer) error, err error)
	// Restore replaces the state with one that a Snapshot's write wrote.
	Restore(r io.Reader) error
}

// Config configures a Host.
type Config struct {
	Node   uint64      // this node's id, also its member id in every group; not 0
	Log    *wal.Shared // the node's log, open; the caller closes it after Stop
	Sender transport.Sender
	// FS and SnapDir are where the groups' snapshots go, each group's in
	// a directory of its own (see the package doc). Without a SnapDir, no
	// group takes snapshots, Snapshotter or not: each keeps its whole log.
	FS      vfs.FS
	SnapDir string
	// SnapshotEntries is how many entries a group applies between two
	// snapshots; default 10,000. MaxLogBytes is the size of the log past
	// which the groups that keep its oldest segment are asked to snapshot
	// (wal.Shared.Holders); default 256 MiB.
	SnapshotEntries int
	MaxLogBytes     int64
	// Workers is how many groups are processed at once; default 4.
	Workers int
	// TickInterval is raft's tick; default 100 ms. ElectionTicks (default
	// 10) and HeartbeatTicks (default 1) are raft's.
	TickInterval                  time.Duration
	ElectionTicks, HeartbeatTicks int
	// QuiesceTicks is how long a leader stays idle before its group
	// quiesces; default ElectionTicks.
	QuiesceTicks int
	Logger       *slog.Logger // default slog.Default()
	// OnMember, if set, is told each member's info (AddMember's) as this
	// node learns it: from a change applied, or a snapshot restored or
	// installed, so perhaps more than once. It is called on the group's
	// apply goroutine, and must neither block nor call the Host.
	OnMember func(group, node uint64, info []byte)
}

func (c *Config) withDefaults() {
	if c.Workers <= 0 {
		c.Workers = 4
	}
	if c.TickInterval <= 0 {
		c.TickInterval = 100 * time.Millisecond
	}
	if c.ElectionTicks <= 0 {
		c.ElectionTicks = 10
	}
	if c.HeartbeatTicks <= 0 {
		c.HeartbeatTicks = 1
	}
	if c.SnapshotEntries <= 0 {
		c.SnapshotEntries = 10000
	}
	if c.MaxLogBytes <= 0 {
		c.MaxLogBytes = 256 << 20
	}
	if c.QuiesceTicks <= 0 {
		c.QuiesceTicks = c.ElectionTicks
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Errors of Propose.
var (
	ErrNotLeader    = errors.New("multiraft: not the group's leader")
	ErrNoGroup      = errors.New("multiraft: no such group on this node")
	ErrStopped      = errors.New("multiraft: the host stopped")
	ErrUnknownState = errors.New("multiraft: the proposal's outcome is unknown")
)

// Host runs raft groups on one node. Its methods may be called from any
// goroutine; it is also the node's transport.Handler.
type Host struct {
	cfg    Config
	queue  queue
	writer writer
	snaps  snapQueue
	live   liveness
	stop   chan struct{}
	wg     sync.WaitGroup
	// proposals numbers the proposals made here, from the time the host
	// started, so that entries that a host before a restart proposed, and
	// this one applies again, answer none of this one's.
	proposals atomic.Uint64
	mu        struct {
		sync.Mutex
		groups map[uint64]*group
		list   []*group // the groups, in the order added
		err    error    // the log's failure, or ErrStopped
	}
}

var _ transport.Handler = (*Host)(nil)

// New starts a host with no group.
func New(cfg Config) *Host {
	cfg.withDefaults()
	h := &Host{cfg: cfg, stop: make(chan struct{})}
	h.mu.groups = map[uint64]*group{}
	h.proposals.Store(uint64(time.Now().UnixNano()))
	h.queue.init()
	h.writer.init()
	h.snaps.init()
	h.live.init()
	h.wg.Add(cfg.Workers + 3)
	for range cfg.Workers {
		go h.work()
	}
	go h.writeLoop()
	go h.snapLoop()
	go h.tickLoop()
	return h
}

// AddGroup starts group id (not 0) on this node, with members, the node
// ids of the group's first voters (the same on every node and at every
// start, whatever changes were made since: see the package doc,
// "Membership changes"), and sm, its state. A group that has a snapshot
// here restores sm from its newest one and goes on from the log after it;
// one that has none applies its log to sm from the first entry. It may be
// called while the host runs: messages for a group that arrive before it
// is added are dropped, as a node that is down drops them.
func (h *Host) AddGroup(id uint64, members []uint64, sm StateMachine) error {
	if id == 0 {
		return errors.New("multiraft: group 0 is the node's own channel")
	}
	snap, r, lg, err := h.restore(id, members, sm)
	if err != nil {
		return err
	}
	// The commit index alone is not written (see ready): the snapshot's
	// entries are committed.
	hs := lg.HardState()
	hs.Commit = max(hs.Commit, snap.Index)
	storage, err := raftlog.New(lg, snap, hs, raftlog.Options{CacheBytes: groupCacheBytes, CacheEntries: groupCacheEntries})
	if err != nil {
		return err
	}
	rn, err := raft.NewRawNode(&raft.Config{
		ID: h.cfg.Node, Applied: snap.Index, ElectionTick: h.cfg.ElectionTicks, HeartbeatTick: h.cfg.HeartbeatTicks,
		Storage: storage, MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 256,
		CheckQuorum: true, PreVote: true, StepDownOnRemoval: true, Logger: silentRaft,
	})
	if err != nil {
		return fmt.Errorf("multiraft: group %d: %w", id, err)
	}
	g := newGroup(id, rn, storage, sm, hs, snap, h.cfg.SnapDir != "")
	h.setRoster(g, r)
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.mu.groups[id]; ok {
		return fmt.Errorf("multiraft: group %d is already on this node", id)
	}
	h.mu.groups[id] = g
	h.mu.list = append(h.mu.list, g)
	h.addPeers(snap.ConfState)
	return nil
}

// addPeers makes the nodes of cs, but this one, peers that the host
// sends its heartbeat to (see liveness).
func (h *Host) addPeers(cs raftpb.ConfState) {
	for _, ids := range [][]uint64{cs.Voters, cs.Learners, cs.VotersOutgoing, cs.LearnersNext} {
		for _, m := range ids {
			if m != h.cfg.Node {
				h.live.addPeer(m)
			}
		}
	}
}

// groupList returns the groups, in the order added. The list returned is
// never written again.
func (h *Host) groupList() []*group {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.mu.list[:len(h.mu.list):len(h.mu.list)]
}

// The bounds of each group's cache of its latest entries (see raftlog):
// a node may host thousands of groups, so each gets a small share of what
// a process of one group keeps.
const (
	groupCacheBytes   = 4 << 20
	groupCacheEntries = 4096
)

// silentRaft drops raft's narration (it logs every election); its panics
// still panic.
var silentRaft = &raft.DefaultLogger{Logger: log.New(io.Discard, "", 0)}

// group returns group id, or nil.
func (h *Host) group(id uint64) *group {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.mu.groups[id]
}

// Campaign makes this node's member of group id stand for election now.
func (h *Host) Campaign(id uint64) error {
	g := h.group(id)
	if g == nil {
		return ErrNoGroup
	}
	g.mu.Lock()
	err := g.rn.Campaign()
	g.wake()
	g.mu.Unlock()
	h.queue.push(g)
	return err
}

// Leader returns the node that this node takes for group id's leader, or
// 0.
func (h *Host) Leader(id uint64) uint64 {
	g := h.group(id)
	if g == nil {
		return 0
	}
	return g.lead.Load()
}

// Quiesced returns how many of the node's groups are quiesced.
func (h *Host) Quiesced() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, g := range h.mu.groups {
		if g.quiesced.Load() {
			n++
		}
	}
	return n
}

// Err returns the failure that stopped the host, if any: its log's.
func (h *Host) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.mu.err
}

// fail stops the host after a failure of its log: what the log holds is
// unknown, so nothing more may be acknowledged.
func (h *Host) fail(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.err == nil {
		h.mu.err = err
		h.cfg.Logger.Error("multiraft: the log failed; the host stops", "err", err)
		close(h.stop)
	}
}

// Stop stops the host's goroutines and waits for them. Proposals waiting
// get ErrStopped. The log stays open.
func (h *Host) Stop() {
	h.mu.Lock()
	if h.mu.err == nil {
		h.mu.err = ErrStopped
		close(h.stop)
	}
	groups := h.mu.groups
	h.mu.Unlock()
	h.queue.close()
	h.writer.close()
	h.snaps.close()
	h.wg.Wait()
	for _, g := range groups {
		g.mu.Lock()
		g.dropWaiters(ErrStopped)
		g.dropReads(ErrStopped)
		g.mu.Unlock()
	}
}

// Receive implements transport.Handler: group 0 is the peer node's own
// channel (see liveness), the others its groups'.
func (h *Host) Receive(from, group uint64, msgs []raftpb.Message) {
	if group == 0 {
		h.live.heard(from)
		return
	}
	if g := h.group(group); g != nil && g.receive(msgs) {
		h.queue.push(g)
	}
}

// Unreachable implements transport.Handler.
func (h *Host) Unreachable(to, group uint64) {
	if g := h.group(group); g != nil {
		g.unreachable(to)
		h.queue.push(g)
	}
}

// send sends msgs, in order, grouped by the node they go to.
func (h *Host) send(group uint64, msgs []raftpb.Message) {
	for len(msgs) > 0 {
		to, n := msgs[0].To, 1
		for n < len(msgs) && msgs[n].To == to {
			n++
		}
		h.cfg.Sender.Send(to, group, msgs[:n:n])
		msgs = msgs[n:]
	}
}
