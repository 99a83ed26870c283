package multiraft

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/seedtest"
	"github.com/flintkv/flint/internal/snap"
	"github.com/flintkv/flint/internal/transport/transporttest"
	"github.com/flintkv/flint/internal/vfs"
	"github.com/flintkv/flint/internal/wal"
)

// These tests run several nodes in one process, each a Host of several
// groups on its own in-memory filesystem, over an in-memory network whose
// faults, like the nemesis's choices and the power losses' tearing, come
// from a seed that the test logs.

// list is a group's state in the tests: the values applied, in order,
// and the index of each.
type list struct {
	mu      sync.Mutex
	values  []string
	indexes []uint64
	applied int // entries applied since the list was made or restored
}

func (l *list) Apply(index uint64, data []byte) any {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.indexes); n > 0 && index <= l.indexes[n-1] {
		panic(fmt.Sprintf("entry %d applied after entry %d", index, l.indexes[n-1]))
	}
	l.values, l.indexes = append(l.values, string(data)), append(l.indexes, index)
	l.applied++
	return len(l.values)
}

// listState is a list's snapshot.
type listState struct {
	Values  []string
	Indexes []uint64
}

// Snapshot implements Snapshotter: it captures a copy, which write
// writes as JSON.
func (l *list) Snapshot() (func(io.Writer) error, error) {
	l.mu.Lock()
	st := listState{slices.Clone(l.values), slices.Clone(l.indexes)}
	l.mu.Unlock()
	return func(w io.Writer) error { return json.NewEncoder(w).Encode(st) }, nil
}

func (l *list) Restore(r io.Reader) error {
	var st listState
	if err := json.NewDecoder(r).Decode(&st); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.values, l.indexes, l.applied = st.Values, st.Indexes, 0
	return nil
}

// appliedSince returns how many entries were applied since the list was
// made or restored.
func (l *list) appliedSince() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.applied
}

// state returns the values and their indexes.
func (l *list) state() ([]string, []uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.values), slices.Clone(l.indexes)
}

func (l *list) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.values)
}

// router is a node's transport.Handler across restarts of its host: what
// arrives while it is down is dropped, as a real network would.
type router struct {
	h     atomic.Pointer[Host]
	snaps atomic.Int64 // snapshots received, counted once ReceiveSnapshot returned
}

func (r *router) Receive(from, group uint64, msgs []raftpb.Message) {
	if h := r.h.Load(); h != nil {
		h.Receive(from, group, msgs)
	}
}

func (r *router) ReceiveSnapshot(from, group uint64, m raftpb.Message, body io.Reader) error {
	h := r.h.Load()
	if h == nil {
		return errors.New("node down")
	}
	err := h.ReceiveSnapshot(from, group, m, body)
	if err == nil {
		r.snaps.Add(1)
	}
	return err
}

func (r *router) Unreachable(to, group uint64) {
	if h := r.h.Load(); h != nil {
		h.Unreachable(to, group)
	}
}

func (r *router) SnapshotDone(to, group uint64, err error) {
	if h := r.h.Load(); h != nil {
		h.SnapshotDone(to, group, err)
	}
}

// node is one node of a test cluster, across restarts of its host.
type node struct {
	id     uint64
	fs     vfs.FS // a *vfs.Mem, but in benchmarks
	dir    string // in fs, of its log ("wal") and snapshots ("snap")
	router router
	ep     *transporttest.Endpoint
	log    *wal.Shared
	host   *Host
	lists  map[uint64]*list
	groups []uint64 // the groups it hosts
}

// cluster is nodes 1..n, each a member of every group 1..g.
type cluster struct {
	t      testing.TB
	net    *transporttest.Network
	nodes  []*node
	groups []uint64
	boot   []uint64 // every group's first members
	// cfg is every host's, but for what start sets. Groups take
	// snapshots if cfg.SnapshotEntries is set; else the hosts have no
	// SnapDir.
	cfg Config
	// segmentSize is the nodes' logs' wal.Options.SegmentSize.
	segmentSize int64
}

func newCluster(t testing.TB, n, groups int, seed uint64, cfg Config) *cluster {
	return newClusterSegments(t, n, groups, seed, cfg, 64<<10)
}

// newClusterSegments is newCluster whose logs start a segment every
// segmentSize bytes.
func newClusterSegments(t testing.TB, n, groups int, seed uint64, cfg Config, segmentSize int64) *cluster {
	fss := make([]vfs.FS, n)
	for i := range fss {
		fss[i] = vfs.NewMem()
	}
	return newClusterOn(t, fss, make([]string, n), groups, seed, cfg, segmentSize)
}

// newClusterOn is newClusterSegments with a node on each of fss, with its
// log and snapshots in the same element of dirs.
func newClusterOn(t testing.TB, fss []vfs.FS, dirs []string, groups int, seed uint64, cfg Config, segmentSize int64) *cluster {
	c := &cluster{t: t, net: transporttest.NewNetwork(int64(seed)), cfg: cfg, segmentSize: segmentSize}
	for g := range groups {
		c.groups = append(c.groups, uint64(g+1))
	}
	for i, fs := range fss {
		nd := &node{id: uint64(i + 1), fs: fs, dir: dirs[i], groups: c.groups}
		nd.ep = c.net.Register(nd.id, &nd.router)
		c.nodes = append(c.nodes, nd)
		c.boot = append(c.boot, nd.id)
	}
	for _, nd := range c.nodes {
		c.start(nd)
	}
	t.Cleanup(func() {
		for _, nd := range c.nodes {
			c.stop(nd)
		}
		c.net.Close()
	})
	return c
}

// addNode starts a new node that hosts groups, none of which it is a
// member of yet.
func (c *cluster) addNode(groups ...uint64) *node {
	nd := &node{id: uint64(len(c.nodes) + 1), fs: vfs.NewMem(), groups: groups}
	nd.ep = c.net.Register(nd.id, &nd.router)
	c.nodes = append(c.nodes, nd)
	c.start(nd)
	return nd
}

// start opens node nd's log and starts its host with its groups.
func (c *cluster) start(nd *node) {
	c.t.Helper()
	log, err := wal.OpenShared(nd.fs, path.Join(nd.dir, "wal"), wal.Options{Logger: quiet, SegmentSize: c.segmentSize})
	if err != nil {
		c.t.Fatalf("node %d: %v", nd.id, err)
	}
	cfg := c.cfg
	cfg.Node, cfg.Log, cfg.Logger = nd.id, log, quiet
	if cfg.SnapshotEntries != 0 {
		cfg.FS, cfg.SnapDir = nd.fs, path.Join(nd.dir, "snap")
	}
	cfg.Sender = nd.ep
	h := New(cfg)
	nd.log, nd.host, nd.lists = log, h, map[uint64]*list{}
	for _, g := range nd.groups {
		nd.lists[g] = &list{}
		if err := h.AddGroup(g, c.boot, nd.lists[g]); err != nil {
			c.t.Fatalf("node %d: %v", nd.id, err)
		}
	}
	nd.router.h.Store(h)
}

// stop stops node nd's host and closes its log, if it runs.
func (c *cluster) stop(nd *node) {
	if nd.host == nil {
		return
	}
	nd.router.h.Store(nil)
	nd.host.Stop()
	nd.log.Close()
	nd.host, nd.log = nil, nil
}

// crash stops node nd and loses what its filesystem had not synced, as a
// power loss tears it, then starts it again.
func (c *cluster) crash(nd *node, rng *rand.Rand) {
	c.stop(nd)
	nd.fs.(*vfs.Mem).CrashWith(rng)
	c.start(nd)
}

var quiet = slog.New(slog.DiscardHandler)

// write proposes value to group g at whichever node leads it, trying
// each node in turn, until one takes it or 20 s have passed. It returns
// the host that acknowledged the write, or nil and whether it may have
// been applied.
func (c *cluster) write(g uint64, value string, hosts func() []*Host) (by *Host, maybe bool) {
	deadline := time.Now().Add(20 * time.Second)
	for try := 0; time.Now().Before(deadline); try++ {
		for _, h := range hosts() {
			if h == nil || h.Leader(g) != h.cfg.Node {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			_, err := h.Propose(ctx, g, []byte(value))
			cancel()
			switch {
			case err == nil:
				return h, true
			case errors.Is(err, ErrNotLeader) || errors.Is(err, ErrNoGroup):
			default:
				return nil, true
			}
		}
		time.Sleep(time.Duration(min(try+1, 20)) * time.Millisecond)
	}
	return nil, false
}

// checkRead reads group g at h through a read barrier, and fails unless
// it holds every value in acked, acknowledged before. A barrier that fails (h lost its leadership, or stopped) reads
// nothing. It reports whether it read.
func checkRead(t *testing.T, h *Host, l *list, g uint64, acked []string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if h.ReadBarrier(ctx, g) != nil {
		return false
	}
	got := l.snapshot()
	for _, v := range acked {
		if !slices.Contains(got, v) {
			t.Errorf("group %d: a read at node %d after a barrier misses %q, acknowledged before it", g, h.cfg.Node, v)
			break
		}
	}
	return true
}

// TestClusterWithFaults writes to every group of three nodes, each hosting
// all the groups, through message drops, duplicates, delays, partitions
// and power losses of whole nodes; then heals the network and checks that
// every node applied the same values to each group, and that those hold
// every acknowledged write once, in the order acknowledged, and no value
// never proposed.
//
// With snapshots, each group snapshots every 10 entries and the logs
// release what the snapshots hold, in segments of 4 KiB: members that fall
// behind are sent snapshots, and power losses strike while they install
// them too. Without, the hosts have no SnapDir, and the logs keep every
// entry, though the groups' states are Snapshotters.
func TestClusterWithFaults(t *testing.T) {
	t.Run("log", func(t *testing.T) {
		testClusterWithFaults(t, Config{TickInterval: 5 * time.Millisecond, Workers: 3}, 4<<10)
	})
	t.Run("snapshots", func(t *testing.T) {
		c := testClusterWithFaults(t, Config{TickInterval: 5 * time.Millisecond, Workers: 3, SnapshotEntries: 10, MaxLogBytes: 16 << 10}, 4<<10)
		installed := int64(0)
		for _, nd := range c.nodes {
			installed += nd.router.snaps.Load()
			if m := nd.log.Metrics(); m.LogBytes > 64<<10 {
				t.Errorf("node %d's log holds %d bytes in %d segments: it was not released", nd.id, m.LogBytes, m.Segments)
			}
		}
		t.Logf("%d snapshots sent to members behind", installed)
	})
}

func testClusterWithFaults(t *testing.T, cfg Config, segmentSize int64) *cluster {
	seed := seedtest.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	c := newClusterSegments(t, 3, 6, seed, cfg, segmentSize)
	c.net.SetFaults(transporttest.Faults{Drop: 0.05, Duplicate: 0.02, Reorder: 0.02, MaxDelay: 2 * time.Millisecond})
	var hostsMu sync.Mutex
	lists := map[*Host]map[uint64]*list{} // every host's, to read from
	hosts := func() []*Host {
		hostsMu.Lock()
		defer hostsMu.Unlock()
		var hs []*Host
		for _, nd := range c.nodes {
			hs = append(hs, nd.host)
			lists[nd.host] = nd.lists
		}
		return hs
	}
	listOf := func(h *Host, g uint64) *list {
		hostsMu.Lock()
		defer hostsMu.Unlock()
		return lists[h][g]
	}
	type outcome struct{ acked, maybe []string }
	var reads atomic.Int64 // reads after a barrier
	outcomes := make([]outcome, len(c.groups))
	var wg sync.WaitGroup
	for i, g := range c.groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 100 {
				v := fmt.Sprintf("g%d-%d", g, k)
				by, maybe := c.write(g, v, hosts)
				if by != nil {
					outcomes[i].acked = append(outcomes[i].acked, v)
					for _, h := range hosts() {
						if h != nil && checkRead(t, h, listOf(h, g), g, outcomes[i].acked) {
							reads.Add(1)
						}
					}
				} else if maybe {
					outcomes[i].maybe = append(outcomes[i].maybe, v)
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	crashes, partitions := 0, 0
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-time.After(20 * time.Millisecond):
			nd := c.nodes[rng.IntN(len(c.nodes))]
			switch r := rng.IntN(10); {
			case r < 2:
				c.net.Isolate(nd.id)
				partitions++
			case r < 3:
				hostsMu.Lock()
				c.crash(nd, rng)
				hostsMu.Unlock()
				crashes++
			default:
				c.net.Heal()
			}
		}
	}
	c.net.Heal()
	c.net.SetFaults(transporttest.Faults{})
	acked, maybe := 0, 0
	for i, g := range c.groups {
		final := c.converged(g)
		checkValues(t, g, final, outcomes[i].acked, outcomes[i].maybe)
		acked, maybe = acked+len(outcomes[i].acked), maybe+len(outcomes[i].maybe)
	}
	t.Logf("%d writes acknowledged, %d of unknown outcome, %d reads after a barrier, through %d power losses and %d isolations",
		acked, maybe, reads.Load(), crashes, partitions)
	if reads.Load() == 0 {
		t.Error("no read barrier succeeded")
	}
	return c
}

// converged waits until every node has applied the same values to group
// g, at the same indexes, with a leader, and returns them.
func (c *cluster) converged(g uint64) []string {
	c.t.Helper()
	return c.convergedAt(g, c.nodes)
}

// convergedAt is converged for the group's members nodes.
func (c *cluster) convergedAt(g uint64, nodes []*node) []string {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var first []string
		var firstIndexes []uint64
		same := true
		for i, nd := range nodes {
			v, x := nd.lists[g].state()
			if i == 0 {
				first, firstIndexes = v, x
			} else if !slices.Equal(v, first) || !slices.Equal(x, firstIndexes) {
				same = false
			}
		}
		if same && nodes[0].host.Leader(g) != 0 {
			return first
		}
		if time.Now().After(deadline) {
			for _, nd := range nodes {
				c.t.Logf("node %d: group %d applied %d values, leader %d", nd.id, g, len(nd.lists[g].snapshot()), nd.host.Leader(g))
			}
			c.t.Fatalf("group %d: the nodes did not converge in 30 s", g)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkValues fails unless final, what every node applied to group g,
// holds each acknowledged value once and in order, the others at most
// once, and nothing else.
func checkValues(t testing.TB, g uint64, final, acked, maybe []string) {
	t.Helper()
	pos := map[string]int{}
	for i, v := range final {
		if _, ok := pos[v]; ok {
			t.Fatalf("group %d applied %q twice", g, v)
		}
		pos[v] = i
	}
	last := -1
	for _, v := range acked {
		i, ok := pos[v]
		if !ok {
			t.Fatalf("group %d lost the acknowledged write %q (it applied %d values)", g, v, len(final))
		}
		if i < last {
			t.Fatalf("group %d applied the acknowledged write %q before the one acknowledged before it", g, v)
		}
		last = i
		delete(pos, v)
	}
	for _, v := range maybe {
		delete(pos, v)
	}
	for v := range pos {
		t.Fatalf("group %d applied %q, which was never proposed", g, v)
	}
	if len(acked) == 0 {
		t.Fatalf("group %d: no write was acknowledged", g)
	}
}

// waitCompacted waits until nodes compacted group g's log past index, so
// that a member whose log ends at index needs a snapshot.
func (c *cluster) waitCompacted(g uint64, nodes []*node, index uint64) {
	c.t.Helper()
	waitFor(c.t, fmt.Sprintf("group %d's logs compacted past %d", g, index), func() bool {
		for _, nd := range nodes {
			if first, _ := nd.host.group(g).storage.FirstIndex(); first <= index+1 {
				return false
			}
		}
		return true
	})
}

// waitFor polls cond every 10 ms until it holds, failing after a minute.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
	}
}

// TestIdleGroupsQuiesce: 150 groups on three nodes cost a fixed
// number of goroutines, and once idle they all quiesce; when a node that
// leads some of them stops, those wake, elect new leaders on the other
// nodes and take writes.
func TestIdleGroupsQuiesce(t *testing.T) {
	const groups = 150
	before := runtime.NumGoroutine()
	c := newCluster(t, 3, groups, seedtest.Seed(t), Config{TickInterval: 50 * time.Millisecond, Workers: 2})
	// Each host has 2 workers, a log writer, a snapshot writer and a
	// ticker; the network a goroutine per node; the logs none while idle.
	if n := runtime.NumGoroutine() - before; n > 3*(2+3)+3+6 {
		t.Fatalf("%d goroutines for 3 hosts of %d groups each", n, groups)
	}
	for i, g := range c.groups { // spread the leaders
		if err := c.nodes[i%3].host.Campaign(g); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "every group quiesced", func() bool {
		n := 0
		for _, nd := range c.nodes {
			n += nd.host.Quiesced()
		}
		return n == 3*groups
	})
	down := c.nodes[0]
	var led []uint64
	for _, g := range c.groups {
		if c.nodes[1].host.Leader(g) == down.id {
			led = append(led, g)
		}
	}
	if len(led) == 0 {
		t.Fatal("node 1 leads no group")
	}
	c.stop(down)
	c.net.Isolate(down.id)
	waitFor(t, "new leaders for the groups node 1 led", func() bool {
		for _, g := range led {
			if l := c.nodes[1].host.Leader(g); l == 0 || l == down.id {
				return false
			}
		}
		return true
	})
	for _, g := range led[:min(len(led), 10)] {
		if by, _ := c.write(g, "after", func() []*Host { return []*Host{c.nodes[1].host, c.nodes[2].host} }); by == nil {
			t.Fatalf("group %d took no write after its leader's node stopped", g)
		}
	}
}

// TestRestartFromSnapshot: groups of one member that snapshot every 10
// entries release their log: the first group's last entries, which keep
// the oldest segments once the second group writes, are released when the
// log, past MaxLogBytes, asks it to snapshot. A restarted host restores
// each group's state from its newest snapshot, then applies only the
// entries after it.
func TestRestartFromSnapshot(t *testing.T) {
	c := newClusterSegments(t, 1, 2, seedtest.Seed(t), Config{TickInterval: 5 * time.Millisecond, SnapshotEntries: 10, MaxLogBytes: 4 << 10}, 1<<10)
	nd := c.nodes[0]
	hists := map[uint64]*history{}
	for _, g := range c.groups {
		hists[g] = &history{}
		c.writeAll(g, c.nodes, hists[g], valuesFrom("v", 55))
	}
	waitFor(t, "the log released", func() bool { return nd.log.Metrics().Segments <= 4 })
	c.stop(nd)
	c.start(nd)
	for _, g := range c.groups {
		final := c.checkConverged(g, c.nodes, hists[g])
		if n := nd.lists[g].appliedSince(); n >= len(final) {
			t.Fatalf("group %d applied all %d entries again: it did not start from a snapshot", g, n)
		}
	}
}

// TestRestartFromDamagedSnapshot: a host whose newest snapshot of a group
// is damaged or cut short refuses the group, with an error that names the
// file and the damage, rather than start from an older state.
func TestRestartFromDamagedSnapshot(t *testing.T) {
	c := newClusterSegments(t, 1, 1, seedtest.Seed(t), Config{TickInterval: 5 * time.Millisecond, SnapshotEntries: 10}, 1<<10)
	nd, g := c.nodes[0], c.groups[0]
	c.writeAll(g, c.nodes, &history{}, valuesFrom("v", 25))
	dir := path.Join(nd.dir, "snap", fmt.Sprintf("%016x", g))
	waitFor(t, "a snapshot", func() bool { infos, _ := snap.List(nd.fs, dir); return len(infos) > 0 })
	c.stop(nd)
	infos, err := snap.List(nd.fs, dir)
	if err != nil {
		t.Fatal(err)
	}
	name := path.Join(dir, infos[len(infos)-1].Name)
	mem := nd.fs.(*vfs.Mem)
	good, err := mem.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	flipped := slices.Clone(good)
	flipped[len(flipped)/2] ^= 1
	for what, bad := range map[string][]byte{"damaged": flipped, "cut short": good[:len(good)-9]} {
		if err := mem.WriteFile(name, bad); err != nil {
			t.Fatal(err)
		}
		log, err := wal.OpenShared(nd.fs, path.Join(nd.dir, "wal"), wal.Options{Logger: quiet, SegmentSize: c.segmentSize})
		if err != nil {
			t.Fatal(err)
		}
		h := New(Config{Node: nd.id, Log: log, Sender: nd.ep, Logger: quiet, FS: nd.fs, SnapDir: path.Join(nd.dir, "snap"), SnapshotEntries: 10})
		err = h.AddGroup(g, c.boot, &list{})
		h.Stop()
		log.Close()
		var se *snap.Error
		if !errors.As(err, &se) || se.File != name || !strings.Contains(err.Error(), "restoring snapshot") {
			t.Fatalf("AddGroup of a group whose snapshot is %s: %v, want the snapshot's damage", what, err)
		}
	}
}

// TestCatchUpBySnapshot: a member cut off while the others take writes and
// snapshots, and release their logs, catches up by the snapshot its
// leader sends, then by the log, across a restart of its host too.
func TestCatchUpBySnapshot(t *testing.T) {
	c := newClusterSegments(t, 3, 2, seedtest.Seed(t), Config{TickInterval: 5 * time.Millisecond, SnapshotEntries: 10}, 1<<10)
	behind, up := c.nodes[2], c.nodes[:2]
	c.net.Isolate(behind.id)
	hists := map[uint64]*history{}
	for _, g := range c.groups {
		hists[g] = &history{}
		c.writeAll(g, up, hists[g], valuesFrom("v", 40))
	}
	for _, g := range c.groups {
		last, _ := behind.host.group(g).storage.LastIndex()
		c.waitCompacted(g, up, last)
	}
	c.net.Heal()
	for _, g := range c.groups {
		final := c.checkConverged(g, c.nodes, hists[g])
		if n := behind.lists[g].appliedSince(); n >= len(final) {
			t.Fatalf("group %d: the member behind applied all %d entries: it caught up without a snapshot", g, n)
		}
	}
	c.stop(behind)
	c.start(behind)
	for _, g := range c.groups {
		c.writeAll(g, up, hists[g], []string{"after"})
		c.checkConverged(g, c.nodes, hists[g])
	}
}

// TestSnapshotsNotTaken: snapshot files that leaders sent and raft did not
// take (newer than the log, as a member that already held the entries
// gets) never push out the snapshot raft holds: a member behind still
// gets it, and a restart starts from it, not from them.
func TestSnapshotsNotTaken(t *testing.T) {
	c := newClusterSegments(t, 3, 1, seedtest.Seed(t), Config{TickInterval: 5 * time.Millisecond, SnapshotEntries: 10}, 1<<10)
	g := c.groups[0]
	hist := &history{}
	c.writeAll(g, c.nodes, hist, []string{"v"})
	lead := c.leader(g)
	behind := c.nodes[0]
	if behind == lead {
		behind = c.nodes[1]
	}
	dir := path.Join(lead.dir, "snap", fmt.Sprintf("%016x", g))
	for _, index := range []uint64{1000, 1001} {
		write := func(w io.Writer) error {
			return json.NewEncoder(w).Encode(listState{Values: []string{"never"}, Indexes: []uint64{index}})
		}
		if _, _, err := snap.WriteStream(lead.fs, dir, snap.Meta{Index: index, Term: 99, Conf: raftpb.ConfState{Voters: c.boot}}, write); err != nil {
			t.Fatal(err)
		}
	}
	c.net.Isolate(behind.id)
	var others []*node
	for _, nd := range c.nodes {
		if nd != behind {
			others = append(others, nd)
		}
	}
	c.writeAll(g, others, hist, valuesFrom("w", 30))
	last, _ := behind.host.group(g).storage.LastIndex()
	c.waitCompacted(g, others, last)
	c.net.Heal()
	final := c.checkConverged(g, c.nodes, hist)
	if n := behind.lists[g].appliedSince(); n >= len(final) {
		t.Fatalf("the member behind applied all %d entries: it caught up without a snapshot", n)
	}
	c.stop(lead)
	c.start(lead)
	c.checkConverged(g, c.nodes, hist)
}
