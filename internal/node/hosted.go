package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"path"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/hostgroup"
	"github.com/flintkv/flint/internal/multiraft"
	"github.com/flintkv/flint/internal/vfs"
	"github.com/flintkv/flint/internal/wal"
)

// HostedGroup is a data group of a sharded cluster whose members are
// hosted by nodes (see Config.Hosted): its id in the map, and each
// member's client address by member id, which is the id of the node that
// hosts it. Join says that this node joins the group as a new member: it
// runs the group with its other members as the first ones, as multiraft
// requires, until the leader adds it (FLINT.MEMBER ADD). The node's
// configuration starts from them on every start, and its log holds the
// changes since, so Join stays set on restarts.
type HostedGroup struct {
	ID      uint64
	Members map[uint64]string
	Join    bool
}

// first returns g's first members, as node self runs the group: all of
// them, or, for a group it joins, the others.
func (g HostedGroup) first(self uint64) []uint64 {
	ids := slices.Sorted(maps.Keys(g.Members))
	if g.Join {
		ids = slices.DeleteFunc(ids, func(id uint64) bool { return id == self })
	}
	return ids
}

// hostedMember is the backend of a member of a hosted group.
type hostedMember struct {
	*hostgroup.Backend
	*shardView
	*hostRoles
	*hostedNode // starts groups (server.GroupHost)
}

// hostRouter is the transport's Handler for a node's Host: it hands what
// arrives to the host once it runs, and drops it before and after.
type hostRouter struct {
	h atomic.Pointer[multiraft.Host]
}

func (r *hostRouter) Receive(from, group uint64, msgs []raftpb.Message) {
	if h := r.h.Load(); h != nil {
		h.Receive(from, group, msgs)
	}
}

func (r *hostRouter) ReceiveSnapshot(from, group uint64, m raftpb.Message, body io.Reader) error {
	if h := r.h.Load(); h != nil {
		return h.ReceiveSnapshot(from, group, m, body)
	}
	return errors.New("node: the host is not running")
}

func (r *hostRouter) Unreachable(to, group uint64) {
	if h := r.h.Load(); h != nil {
		h.Unreachable(to, group)
	}
}

func (r *hostRouter) SnapshotDone(to, group uint64, err error) {
	if h := r.h.Load(); h != nil {
		h.SnapshotDone(to, group, err)
	}
}

// runHosted runs a node that hosts its members of cfg.Hosted: one shared
// log in the data directory (which Open replays, so that each group's
// state is rebuilt from its log), one transport to the nodes of
// cfg.Cluster, one Host, and, for each member, a server on its client
// address. Shutdown stops the servers first, then the host, the
// transport and the log.
func runHosted(ctx context.Context, cfg Config) error {
	c, log := cfg.Cluster, cfg.Logger
	if cfg.Replica.NoSync {
		return errors.New("node: a node hosting groups fsyncs every write to its shared log: --fsync never is not supported")
	}
	lg, err := wal.OpenShared(vfs.OS, path.Join(cfg.Dir, "wal"), wal.Options{SegmentSize: cfg.Replica.SegmentSize,
		Preallocate: cfg.Replica.Preallocate, Logger: log, WaitForSpace: waitForSpace(log, cfg.Dir, "start its log")})
	if err != nil {
		return fmt.Errorf("cannot open the data directory %s: %w", cfg.Dir, err)
	}
	defer lg.Close()
	r := &hostRouter{}
	t, err := startTransport(c, r, log)
	if err != nil {
		return err
	}
	defer t.Close()
	for _, m := range c.Members {
		if m.ID != c.ID {
			t.SetPeer(m.ID, m.Peer)
		}
	}
	// Each group snapshots after --snapshot-entries of its entries, and
	// the groups that keep the log's oldest segment once the log is longer
	// than --snapshot-bytes, so that the log is released behind them.
	learned := &learnedNodes{}
	h := multiraft.New(multiraft.Config{Node: c.ID, Log: lg, Sender: t, TickInterval: c.TickInterval,
		ElectionTicks: c.ElectionTicks, Logger: log, FS: vfs.OS, SnapDir: path.Join(cfg.Dir, "snap"),
		SnapshotEntries: int(min(cfg.Replica.SnapshotEntries, math.MaxInt32)), MaxLogBytes: cfg.Replica.SnapshotBytes,
		OnMember: func(_, node uint64, info []byte) { learned.learnPeer(t, c.ID, node, info) }})
	defer h.Stop()
	started, err := readStarted(cfg.Dir)
	if err != nil {
		return err
	}
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	n := &hostedNode{cfg: cfg, h: h, roles: &hostRoles{h: h, self: c.ID}, follow: newFollower(), ctx: fctx,
		errc: make(chan error, 1), groups: map[uint64]map[uint64]string{}, started: started, learned: learned}
	for _, g := range withStarted(cfg.Hosted, started) {
		addr, ok := g.Members[c.ID]
		if !ok {
			continue
		}
		s, v, err := n.member(g, addr)
		if err != nil {
			return err
		}
		n.srvs, n.groups[g.ID] = append(n.srvs, s), g.Members
		n.follow.add(v)
	}
	if len(n.srvs) == 0 {
		return fmt.Errorf("node: node %d hosts a member of none of the %d groups", c.ID, len(cfg.Hosted))
	}
	r.h.Store(h)
	go followManagers(fctx, cfg.Shard, log, n.follow)
	log.Info("a node hosting data groups of a sharded cluster", "node", c.ID, "cluster", fmt.Sprintf("%016x", c.clusterID()),
		"groups", len(n.srvs), "managers", cfg.Shard.Managers)
	return serveHosted(ctx, n, log)
}

// electionTimeout is the raft clock's election timeout.
func (c *ClusterConfig) electionTimeout() time.Duration {
	return time.Duration(c.ElectionTicks) * c.TickInterval
}

// serveHosted serves n's servers until ctx ends, then shuts down every
// server n has then, letting clients' commands finish for up to
// cfg.ShutdownTimeout; it stops at once with ErrFailed if the host fails
// (its log, say).
func serveHosted(ctx context.Context, n *hostedNode, log *slog.Logger) error {
	h, cfg := n.h, n.cfg
	for _, s := range n.srvs {
		go func() { n.fail(s.ListenAndServe()) }()
	}
	var failed error
	select {
	case err := <-n.errc:
		failed = fmt.Errorf("node: serving clients: %w", err)
	case <-h.Done():
		failed = fmt.Errorf("%w: %w", ErrFailed, h.Err())
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	context.AfterFunc(sctx, h.Stop) // so that a write still waiting does not hold the shutdown up
	var wg sync.WaitGroup
	for _, s := range n.shutdown() {
		wg.Go(func() { s.Shutdown(sctx) })
	}
	wg.Wait()
	h.Stop()
	if failed == nil {
		if err := h.Err(); !errors.Is(err, multiraft.ErrStopped) {
			failed = fmt.Errorf("%w, and stopped: %w", ErrFailed, err)
		}
	}
	if failed == nil {
		log.Info("stopped")
	}
	return failed
}
