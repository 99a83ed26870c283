package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flintkv/flint/internal/ask"
	"github.com/flintkv/flint/internal/replica"
	"github.com/flintkv/flint/internal/server"
	"github.com/flintkv/flint/internal/shardmap"
	"github.com/flintkv/flint/internal/store"
)

// ShardConfig makes the node one of a sharded cluster's: a member of one
// of its data groups, which own the slots, or of its meta group (a
// manager), which holds the cluster map and owns no slots.
//
// A data node asks the managers for the map and the groups' leaders every
// Poll, and until it has the map answers every command with keys
// CLUSTERDOWN. A manager asks a member of each data group for its role
// every Poll, and knows as leader of a group only a member that said it
// leads at the last poll, so that CLUSTER INFO says "ok" only while every
// group has a leader that answers.
type ShardConfig struct {
	// Group is the id in the map of the data group the node's group is,
	// or 0 for a manager.
	Group uint64
	// Managers are the client addresses of the meta group's members, for
	// a data node.
	Managers []string
	// Map is, for a manager, the cluster map it writes into its meta
	// group if the group holds none; nil to wait for one written from
	// outside (FLINT.MAPSET, as `flint cluster create` sends it). Data
	// nodes answer CLUSTERDOWN until the meta group holds a map.
	Map *shardmap.Map
	// Password is what the node AUTHs with when it asks another.
	Password string
	Poll     time.Duration // default 250 ms
}

func (c *ShardConfig) poll() time.Duration {
	if c.Poll <= 0 {
		return 250 * time.Millisecond
	}
	return c.Poll
}

// shardView holds the node's view of the cluster map (server.Sharded).
// It is never empty: before the node knows a map, it holds the node's
// group and managers (which INFO shows), with no map.
type shardView struct {
	group    uint64
	managers []string // those a data node follows; nil at a manager
	p        atomic.Pointer[server.Shards]
}

// newShardView returns the view of a member of group (0: a manager) that
// follows managers, with no map yet.
func newShardView(group uint64, managers []string) *shardView {
	v := &shardView{group: group, managers: managers}
	v.p.Store(&server.Shards{Group: v.group, Managers: v.managers})
	return v
}

// Shards implements server.Sharded.
func (v *shardView) Shards() *server.Shards { return v.p.Load() }

// set replaces the view with m and leaders, keeping the members it knows
// are down, unless it holds a map of a later epoch. It reports whether the
// map is new to the view.
func (v *shardView) set(m *shardmap.Map, leaders map[uint64]uint64) bool {
	var down map[shardmap.MemberKey]bool
	if old := v.p.Load(); old != nil {
		down = old.Down
	}
	return v.setAll(m, leaders, down)
}

// setAll is set with the members that are down.
func (v *shardView) setAll(m *shardmap.Map, leaders map[uint64]uint64, down map[shardmap.MemberKey]bool) bool {
	old := v.p.Load()
	if old != nil && old.Map != nil && old.Map.Epoch > m.Epoch {
		return false
	}
	v.p.Store(&server.Shards{Map: m, Group: v.group, Leaders: leaders, Down: down, Managers: v.managers})
	return old == nil || old.Map == nil || old.Map.Epoch != m.Epoch
}

// follower is the views that one poll of the managers keeps current: a
// node's, to which a hosting node adds the view of each group it starts
// while it runs, so that its poll costs what it did whatever it started.
type follower struct {
	mu    sync.Mutex
	views []*shardView
	last  server.Shards // what the views were set to last; no map before the managers' first answer
}

// newFollower returns the follower of views.
func newFollower(views ...*shardView) *follower { return &follower{views: views} }

// add makes f keep v current too, and gives v at once the map the others
// hold, if any.
func (f *follower) add(v *shardView) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.last.Map != nil {
		v.setAll(f.last.Map, f.last.Leaders, f.last.Down)
	}
	f.views = append(f.views, v)
}

// set gives every view m, leaders and down, unless they hold them already
// (a node hosting 1,000 groups has 1,000 views), and reports whether the
// map is new to one of them.
func (f *follower) set(m *shardmap.Map, leaders map[uint64]uint64, down map[shardmap.MemberKey]bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if m == f.last.Map && maps.Equal(leaders, f.last.Leaders) && maps.Equal(down, f.last.Down) {
		return false
	}
	f.last = server.Shards{Map: m, Leaders: leaders, Down: down}
	learned := false
	for _, v := range f.views {
		learned = v.setAll(m, leaders, down) || learned
	}
	return learned
}

// followManagers keeps f's views the map and leaders that the managers
// know, asking one every poll, the next after one fails, until ctx ends.
func followManagers(ctx context.Context, cfg *ShardConfig, log *slog.Logger, f *follower) {
	pool := ask.NewPool(cfg.Password)
	defer pool.Close()
	i, failing := 0, false
	for {
		m, leaders, down, err := pool.Map(ctx, cfg.Managers[i])
		switch {
		case err == nil:
			if f.set(m, leaders, down) {
				log.Info("learned the cluster map", "epoch", m.Epoch, "groups", len(m.Groups), "from", cfg.Managers[i])
			}
			failing = false
		case ctx.Err() != nil:
			return
		default:
			if !failing {
				log.Warn("cannot get the cluster map from a manager; trying the others", "manager", cfg.Managers[i], "err", err)
			}
			failing, i = true, (i+1)%len(cfg.Managers)
		}
		if !sleep(ctx, cfg.poll()) {
			return
		}
	}
}

// sleep waits d, and reports false if ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// solo is the backend of a data node whose group has one member, this
// node (server.Cluster, server.Sharded): it always leads.
type solo struct {
	*replica.Replica
	*shardView
	addr string // its client address, as the map names it
}

// Redirect implements server.Cluster: a group of one never redirects.
func (solo) Redirect() (string, bool) { return "", false }

// ClusterView implements server.Cluster.
func (s solo) ClusterView() server.ClusterView {
	return server.ClusterView{Self: 1, Leader: 1, Members: []server.ClusterMember{{ID: 1, Addr: s.addr, Voter: true}}}
}

// shardedMember is the backend of a member of a replicated group of a
// sharded cluster.
type shardedMember struct {
	member
	*shardView
}

// metaLocal is the backend of a manager whose meta group has one member
// and keeps nothing on disk: its store holds the map it was started with
// under mapKey, which FLINT.MAPSET changes (see followLocal).
type metaLocal struct {
	server.Local
	*shardView
	addr string
}

// Redirect implements server.Cluster.
func (metaLocal) Redirect() (string, bool) { return "", false }

// ClusterView implements server.Cluster.
func (m metaLocal) ClusterView() server.ClusterView {
	return server.ClusterView{Self: 1, Leader: 1, Members: []server.ClusterMember{{ID: 1, Addr: m.addr, Voter: true}}}
}

// mapKey is the key under which the meta group's store holds the map's
// encoding.
const mapKey = server.MapKey

// keepMap keeps a replicated manager's view the map its meta group holds,
// until ctx ends: the leader writes the configured map, if any, under
// mapKey if the group holds none (the first start), and every poll each
// member reads it back through a read barrier (linearizably) and takes it
// if its epoch is new. A map in the group that differs from the configured
// one wins, and is logged: the group's is the cluster's.
func keepMap(ctx context.Context, cfg *ShardConfig, rep *replica.Replica, self uint64, v *shardView, log *slog.Logger) {
	var want []byte
	if cfg.Map != nil {
		want = cfg.Map.Encode()
	}
	warned := false
	var last []byte // the encoding of the map taken last
	for {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := rep.ReadBarrier(rctx)
		cancel()
		if err == nil {
			got, ok := rep.Store().Get([]byte(mapKey))
			switch {
			case !ok && want != nil && rep.Leader() == self:
				writeMap(ctx, rep, want, log)
			case ok && !bytes.Equal(got, last):
				last = bytes.Clone(got) // the store may reuse its memory
				m, err := shardmap.Decode(got)
				if err != nil {
					log.Error("the meta group holds a map that does not decode", "err", err)
					break
				}
				if want != nil && string(got) != string(want) && !warned {
					log.Warn("the meta group holds a map other than the one this manager was started with; serving the group's",
						"epoch", m.Epoch)
					warned = true
				}
				v.set(m, v.leaders())
			}
		}
		if !sleep(ctx, cfg.poll()) {
			return
		}
	}
}

// writeMap proposes SET mapKey enc NX.
func writeMap(ctx context.Context, rep *replica.Replica, enc []byte, log *slog.Logger) {
	var b store.Batch
	b.Add(store.OpSet, store.SetNX, []byte(mapKey), enc)
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rep.Apply(wctx, b.Bytes(), nil); err != nil {
		log.Warn("cannot write the cluster map into the meta group yet", "err", err)
		return
	}
	log.Info("wrote the cluster map into the meta group", "bytes", len(enc))
}

// leaders returns the view's leaders, or nil.
func (v *shardView) leaders() map[uint64]uint64 { return v.Shards().Leaders }

// followLocal keeps an in-memory manager's view the map its store holds,
// once it holds one, reading it every poll, until ctx ends.
func followLocal(ctx context.Context, cfg *ShardConfig, s *store.Store, v *shardView, log *slog.Logger) {
	var last []byte // the encoding of the map taken last
	for sleep(ctx, cfg.poll()) {
		got, ok := s.Get([]byte(mapKey))
		if !ok || bytes.Equal(got, last) {
			continue
		}
		last = bytes.Clone(got) // the store may reuse its memory
		m, err := shardmap.Decode(got)
		if err != nil {
			log.Error("the manager's store holds a map that does not decode", "err", err)
			continue
		}
		if v.set(m, v.leaders()) {
			log.Info("the cluster map changed", "epoch", m.Epoch)
		}
	}
}

// serveSolo serves rep as the one member of a data group of a sharded
// cluster, following the managers' map.
func serveSolo(ctx context.Context, cfg Config, rep *replica.Replica) error {
	v := newShardView(cfg.Shard.Group, cfg.Shard.Managers)
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	go followManagers(fctx, cfg.Shard, cfg.Logger, newFollower(v))
	cfg.Logger.Info("a data node of a sharded cluster", "group", cfg.Shard.Group, "managers", cfg.Shard.Managers)
	return serve(ctx, server.New(cfg.Server, solo{rep, v, cfg.Server.Addr}), rep, cfg.ShutdownTimeout, cfg.Logger)
}

// runMetaLocal runs a manager of one member that keeps nothing on disk:
// its map is the one it was started with, or the first one written to it
// (FLINT.MAPSET), and it serves no keys; it takes the steps of the slot
// moves the map lists.
func runMetaLocal(ctx context.Context, cfg Config) error {
	if cfg.Shard == nil || cfg.Shard.Group != 0 || cfg.Cluster != nil {
		return errors.New("node: only a manager of one member keeps nothing on disk")
	}
	v := newShardView(cfg.Shard.Group, cfg.Shard.Managers)
	s := store.New(store.Options{})
	if cfg.Shard.Map != nil {
		v.set(cfg.Shard.Map, nil)
		s.Put([]byte(mapKey), cfg.Shard.Map.Encode())
	}
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	go pollLeaders(fctx, cfg.Shard, v)
	go followLocal(fctx, cfg.Shard, s, v, cfg.Logger)
	go driveMoves(fctx, cfg.Shard, v, localMover(cfg.Server.Addr), cfg.Logger)
	cfg.Logger.Info("a manager of a sharded cluster, in memory", "map", cfg.Shard.Map != nil)
	srv := server.New(cfg.Server, metaLocal{server.Local{S: s}, v, cfg.Server.Addr})
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	select {
	case err := <-errc:
		return fmt.Errorf("node: serving clients: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	srv.Shutdown(sctx)
	<-errc
	return nil
}
