// Package node is Flint's composition root: one `flint serve` process. It
// owns everything that is the process's rather than a replica's or a
// server's: the data directory's lock, the scheduler's processors
// (GOMAXPROCS), the collector while a store loads, huge pages, the
// profiling endpoint, and the order in which the parts start and stop.
// Library packages set none of these, so that a test may open several
// replicas in one process.
//
// Startup: lock the directory, start huge pages, open the replica (which
// recovers and leads before it returns), add the log's processor, serve
// clients. Shutdown, when the caller's context ends: stop accepting, let
// clients' commands finish for up to ShutdownTimeout, then close the
// replica, so that a write still waiting (for disk space, say) does not
// hold the process up.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	_ "net/http/pprof" // registers the profiling handlers served by Config.Pprof
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/flintkv/flint/internal/hugepage"
	"github.com/flintkv/flint/internal/replica"
	"github.com/flintkv/flint/internal/server"
	"github.com/flintkv/flint/internal/vfs"
)

// Config is a node's configuration, as `flint serve` parses it.
type Config struct {
	Dir             string
	Server          server.Config
	Replica         replica.Options // Dir, Logger, HoldProcessor and PauseGC are the node's
	HugePages       bool            // move the settled heap into transparent huge pages
	Pprof           string          // serve Go profiles on this address; empty: off
	ShutdownTimeout time.Duration
	Logger          *slog.Logger
	Cluster         *ClusterConfig // nil: a single node, a group of one voter
	Shard           *ShardConfig   // nil: not a node of a sharded cluster
	// Memory, for a manager of one member (Shard.Group 0, Cluster nil):
	// keep nothing on disk; Dir is not used.
	Memory bool
	// Hosted, if set, makes the node host its members of these data groups
	// of a sharded cluster, all on one log and one multiraft.Host (see
	// hosted.go): Cluster then lists the nodes (Member.Client unused) and
	// this node's id, and Shard the managers (Shard.Group unused).
	Hosted []HostedGroup
}

// ErrFailed is returned by Run when the node stopped because it could no
// longer make writes durable.
var ErrFailed = errors.New("node: the node could no longer make writes durable")

// Run runs a node until ctx ends, then shuts it down. It returns nil after
// a clean shutdown; an error that wraps ErrFailed if the replica failed
// (an fsync error, say), before or during the shutdown; or the error that
// kept it from starting.
func Run(ctx context.Context, cfg Config) error {
	log := cfg.Logger
	if cfg.Pprof != "" {
		go servePprof(cfg.Pprof, log)
	}
	if cfg.HugePages {
		// Before the replica loads the store: its heap settles once loaded.
		hctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go keepHugePages(hctx, log)
	}
	if cfg.Memory {
		return runMetaLocal(ctx, cfg)
	}
	lock, err := lockDir(cfg.Dir, log)
	if err != nil {
		return fmt.Errorf("cannot use the data directory %s: %w", cfg.Dir, err)
	}
	defer lock.Close()
	if len(cfg.Hosted) > 0 {
		if err := cfg.Cluster.useStoredID(cfg.Dir); err != nil {
			return fmt.Errorf("cannot use the data directory %s: %w", cfg.Dir, err)
		}
	}
	var incarnation uint64
	claim := func() (err error) { incarnation, err = claimDir(cfg.Dir, cfg.identity()); return err }
	if err := vfs.RetryNoSpace(claim, waitForSpace(log, cfg.Dir, "record whose data directory it is")); err != nil {
		return fmt.Errorf("cannot use the data directory %s: %w", cfg.Dir, err)
	}
	if len(cfg.Hosted) > 0 {
		return runHosted(ctx, cfg)
	}
	opt := cfg.Replica
	opt.Dir, opt.Logger, opt.PauseGC, opt.HoldProcessor = cfg.Dir, log, pauseGC, !opt.NoSync
	if cfg.Shard != nil {
		opt.Store.Group = cfg.Shard.Group // in the client ids its sessions get: unique in the cluster
	}
	if cfg.Cluster == nil {
		rep, err := replica.Open(opt)
		if err != nil {
			return fmt.Errorf("cannot open the data directory %s: %w", cfg.Dir, err)
		}
		if opt.HoldProcessor {
			addLogProcessor() // after Open: recovery's threads use the default
		}
		if cfg.Shard != nil {
			return serveSolo(ctx, cfg, rep)
		}
		return serve(ctx, server.New(cfg.Server, rep), rep, cfg.ShutdownTimeout, log)
	}
	opt.Incarnation = incarnation
	return runMember(ctx, cfg, opt)
}

// identity is whose data directory cfg.Dir must be.
func (cfg *Config) identity() identity {
	if cfg.Cluster == nil {
		return identity{cluster: 0, member: 1}
	}
	return identity{cluster: cfg.Cluster.clusterID(), member: cfg.Cluster.ID}
}

// runMember runs a node that is a member of a replicated group: the
// transport starts first, so that the replica hears its peers as soon as
// it is open; the replica is then the server's backend, and the transport
// stops after both.
func runMember(ctx context.Context, cfg Config, opt replica.Options) error {
	c := cfg.Cluster
	h := &router{group: 1}
	t, err := startTransport(c, h, cfg.Logger)
	if err != nil {
		return err
	}
	defer t.Close()
	opt.ID, opt.Group, opt.Peers, opt.TickInterval, opt.ElectionTicks = c.ID, 1, t, c.TickInterval, c.ElectionTicks
	opt.Members, opt.Join = make(map[uint64][]byte), c.Join != nil
	for _, m := range c.Members {
		opt.Voters = append(opt.Voters, m.ID)
		opt.Members[m.ID] = m.info()
		if c.Join != nil {
			t.SetPeer(m.ID, m.Peer) // whom it hears from until it has the group's members
		}
	}
	rep, err := replica.Open(opt)
	if err != nil {
		return fmt.Errorf("cannot open the data directory %s: %w", cfg.Dir, err)
	}
	h.r.Store(rep)
	if opt.HoldProcessor {
		addLogProcessor()
	}
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	go followMembers(fctx, t, rep, c.ID)
	cfg.Logger.Info("member of a replicated group", "member", c.ID, "cluster", fmt.Sprintf("%016x", c.clusterID()),
		"members", len(c.Members))
	if cfg.Shard == nil {
		return serve(ctx, server.New(cfg.Server, member{Replica: rep, self: c.ID}), rep, cfg.ShutdownTimeout, cfg.Logger)
	}
	return serve(ctx, server.New(cfg.Server, ShardedMember(fctx, cfg.Shard, rep, c.ID, cfg.Logger)), rep,
		cfg.ShutdownTimeout, cfg.Logger)
}

// ShardedMember returns the server backend of rep, member self of a
// replicated group of the sharded cluster cfg names (a data group, or the
// meta group if cfg.Group is 0), and keeps its view of the cluster map as
// a `flint serve` member does, until ctx ends: a manager keeps the map its
// meta group holds (writing cfg.Map there first, if set and the group
// holds none), polls the data groups' members for their leaders and, at
// its leader, takes the steps of the slot moves the map lists; a
// data member asks the managers for the map every poll. rep's members'
// info (replica.Options.Members) is each member's "client@peer"
// addresses, the client address as the map names it. It is the
// composition root's code path, exported for tests that run many members
// in one process.
func ShardedMember(ctx context.Context, cfg *ShardConfig, rep *replica.Replica, self uint64, log *slog.Logger) server.Backend {
	v := newShardView(cfg.Group, cfg.Managers)
	if cfg.Group == 0 {
		go keepMap(ctx, cfg, rep, self, v, log)
		go pollLeaders(ctx, cfg, v)
		go driveMoves(ctx, cfg, v, memberMover(rep, self), log)
	} else {
		go followManagers(ctx, cfg, log, newFollower(v))
	}
	return shardedMember{member{Replica: rep, self: self}, v}
}

// gcPause counts the loads in progress (see pauseGC).
var gcPause struct {
	sync.Mutex
	loads   int
	percent int // the setting to restore once none is in progress
}

// pauseGC turns the collector off until every load that called it has
// called the function it returns (replica.Options.PauseGC): a collection
// during a load would only mark the growing store. GOMEMLIMIT, if set,
// still starts one.
func pauseGC() (resume func()) {
	gcPause.Lock()
	if gcPause.loads == 0 {
		gcPause.percent = debug.SetGCPercent(-1)
	}
	gcPause.loads++
	gcPause.Unlock()
	return sync.OnceFunc(func() {
		gcPause.Lock()
		defer gcPause.Unlock()
		if gcPause.loads--; gcPause.loads == 0 {
			debug.SetGCPercent(gcPause.percent)
		}
	})
}

// addLogProcessor gives the Go scheduler one processor (GOMAXPROCS) more
// than its default, unless the GOMAXPROCS variable sets them (a positive
// number: the runtime ignores anything else). The log's writer holds one
// through each fsync (vfs.SyncHeld, replica.Options.HoldProcessor),
// blocked in the kernel rather than computing; with one more, as many as
// the machine has CPUs stay free to run goroutines meanwhile. Setting the
// number stops the runtime's own updates of its default (to a container's
// new CPU limit). Measured in docs/PERFORMANCE.md ("The log's fsync keeps
// its processor").
func addLogProcessor() {
	if n, err := strconv.Atoi(os.Getenv("GOMAXPROCS")); err != nil || n <= 0 {
		runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1)
	}
}

// keepHugePages collapses the settled parts of the heap into huge pages
// every 100 ms until ctx is done (see package hugepage). Failures are
// logged, at most once a minute, not fatal: the server runs as fast as the
// system's setting allows.
func keepHugePages(ctx context.Context, log *slog.Logger) {
	var last time.Time
	report := func(err error) {
		if time.Since(last) >= time.Minute {
			last = time.Now()
			log.Warn("cannot move the heap into huge pages; will try again", "err", err)
		}
	}
	if err := hugepage.Keep(ctx, 100*time.Millisecond, report); err != nil {
		log.Info("serving without huge pages", "err", err)
	}
}

// servePprof serves the profiling handlers; a failure is logged, not fatal.
func servePprof(addr string, log *slog.Logger) {
	log.Info("serving profiles", "addr", addr)
	if err := http.ListenAndServe(addr, nil); err != nil {
		log.Error("pprof server failed", "err", err)
	}
}
