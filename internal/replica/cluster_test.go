package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flintkv/flint/internal/seedtest"
	"github.com/flintkv/flint/internal/store"
	"github.com/flintkv/flint/internal/transport"
	"github.com/flintkv/flint/internal/transport/transporttest"
	"github.com/flintkv/flint/internal/vfs"
)

// These tests run groups of several members in one process, over an
// in-memory network (transporttest) whose faults come from a seed that the
// test logs, each member on a filesystem that a crash can cut back to what
// was synced.

// memberLogger is member id's logger: silent, unless FLINT_TEST_LOG is set,
// which logs every member to standard error, to follow a failing seed.
func memberLogger(id int) *slog.Logger {
	if os.Getenv("FLINT_TEST_LOG") == "" {
		return quiet()
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("m", id)
}

// cluster is a group of members 1..n.
type cluster struct {
	t      *testing.T
	net    *transporttest.Network
	voters []uint64
	fs     []*vfs.Mem
	incs   []uint64 // each member's Options.Incarnation: its filesystem's
	eps    []*transporttest.Endpoint
	hs     []*transporttest.Switch // each member's handler, across its restarts
	rs     []*Replica              // nil while a member is down
	opt    Options                 // for every member, but for what start sets
	// sender, if set, is what a member sends through, made of its
	// endpoint; otherwise the endpoint itself.
	sender func(e transport.Sender) transport.Sender
}

func newCluster(t *testing.T, n int, seed uint64) *cluster {
	return newClusterWith(t, n, seed, Options{TickInterval: 5 * time.Millisecond, SnapshotEntries: 1 << 40, SnapshotBytes: 1 << 40})
}

func newClusterWith(t *testing.T, n int, seed uint64, opt Options) *cluster {
	return newClusterSending(t, n, seed, opt, nil)
}

// newClusterSending is newClusterWith, every member sending through what
// sender makes of its endpoint, if sender is not nil.
func newClusterSending(t *testing.T, n int, seed uint64, opt Options, sender func(transport.Sender) transport.Sender) *cluster {
	c := &cluster{t: t, net: transporttest.NewNetwork(int64(seed)), opt: opt, sender: sender}
	for i := range n {
		c.voters = append(c.voters, uint64(i+1))
		c.fs, c.incs = append(c.fs, vfs.NewMem()), append(c.incs, uint64(i+1)<<32|1)
		c.hs = append(c.hs, &transporttest.Switch{})
		c.eps = append(c.eps, c.net.Register(uint64(i+1), c.hs[i]))
		c.rs = append(c.rs, nil)
	}
	for i := range n {
		c.start(i)
	}
	t.Cleanup(func() {
		for i := range c.rs {
			c.stop(i)
		}
		c.net.Close()
	})
	return c
}

// start opens member i on its filesystem.
func (c *cluster) start(i int) {
	c.t.Helper()
	opt := c.opt
	opt.FS, opt.Dir, opt.Logger, opt.ID, opt.Voters, opt.Peers = c.fs[i], "data", memberLogger(i+1), uint64(i+1), c.voters, c.peers(i)
	opt.Incarnation = c.incs[i]
	r, err := Open(opt)
	if err != nil {
		c.t.Fatalf("member %d: %v", i+1, err)
	}
	c.rs[i] = r
	c.hs[i].Set(r)
}

// peers is what member i sends through.
func (c *cluster) peers(i int) transport.Sender {
	if c.sender != nil {
		return c.sender(c.eps[i])
	}
	return c.eps[i]
}

// stop closes member i, if it is up.
func (c *cluster) stop(i int) {
	if c.rs[i] != nil {
		c.hs[i].Set(nil)
		c.rs[i].Close()
		c.rs[i] = nil
	}
}

// crash stops member i and drops what its filesystem had not synced.
func (c *cluster) crash(i int) {
	c.stop(i)
	c.fs[i].Crash()
}

// leader waits until a member that is up leads, and returns it.
func (c *cluster) leader() int {
	c.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		for i, r := range c.rs {
			if r != nil && r.Leader() == r.id {
				return i
			}
		}
	}
	c.t.Fatal("no member led within 20 s")
	return -1
}

// setAt applies SET key value at member i, waiting at most d.
func (c *cluster) setAt(i int, d time.Duration, key, value string) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return c.rs[i].Apply(ctx, batchOf(key, value), nil)
}

// set applies SET key value at whichever member leads, trying again until
// it is acknowledged.
func (c *cluster) set(key, value string) {
	c.t.Helper()
	for try := 0; try < 100; try++ {
		if err := c.setAt(c.leader(), time.Second, key, value); err == nil {
			return
		}
	}
	c.t.Fatalf("SET %s not acknowledged in 100 tries", key)
}

// read returns key's value at member i, linearizably (a read barrier through
// the leader), or an error.
func (c *cluster) read(i int, key string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.rs[i].ReadBarrier(ctx); err != nil {
		return "", err
	}
	v, ok := c.rs[i].Store().Get([]byte(key))
	if !ok {
		return "<nil>", nil
	}
	return string(v), nil
}

// TestClusterReplicates writes through the leader of three members and
// reads every write back at each member; a follower refuses writes with
// ErrNotLeader and names the leader.
func TestClusterReplicates(t *testing.T) {
	c := newCluster(t, 3, seedtest.Seed(t))
	for i := range 50 {
		c.set(fmt.Sprint("k", i), fmt.Sprint(i))
	}
	lead := c.leader()
	follower := (lead + 1) % 3
	if err := c.setAt(follower, time.Second, "f", "1"); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("a write at a follower = %v, want ErrNotLeader", err)
	}
	if got := c.rs[follower].Leader(); got != uint64(lead+1) {
		t.Fatalf("the follower names member %d as leader, want %d", got, lead+1)
	}
	for i := range c.rs {
		for k := range 50 {
			if v, err := c.read(i, fmt.Sprint("k", k)); err != nil || v != fmt.Sprint(k) {
				t.Fatalf("member %d: k%d = %q (%v)", i+1, k, v, err)
			}
		}
	}
}

// TestClusterFailover crashes the leader: the other two elect one and go on
// acknowledging writes; the old leader, restarted, catches up from the new
// leader's log, and every acknowledged write is on every member.
func TestClusterFailover(t *testing.T) {
	c := newCluster(t, 3, seedtest.Seed(t))
	for i := range 20 {
		c.set(fmt.Sprint("a", i), "1")
	}
	old := c.leader()
	c.crash(old)
	for i := range 20 {
		c.set(fmt.Sprint("b", i), "2")
	}
	if now := c.leader(); now == old {
		t.Fatalf("member %d still leads after its crash", old+1)
	}
	c.start(old)
	for i := range c.rs {
		for k := range 20 {
			for _, kv := range [][2]string{{fmt.Sprint("a", k), "1"}, {fmt.Sprint("b", k), "2"}} {
				if v, err := c.read(i, kv[0]); err != nil || v != kv[1] {
					t.Fatalf("member %d: %s = %q (%v), want %s", i+1, kv[0], v, err, kv[1])
				}
			}
		}
	}
}

// TestClusterSnapshotCatchUp stops a member while the others write past
// two snapshots, so that the leader's log no longer holds what it missed:
// restarted, it is sent the leader's snapshot, installs it in place of its
// store and log, and then follows the log; a later crash and restart of it
// recovers from the installed snapshot.
func TestClusterSnapshotCatchUp(t *testing.T) {
	c := newClusterWith(t, 3, seedtest.Seed(t), Options{TickInterval: 5 * time.Millisecond, SnapshotEntries: 40})
	c.set("before", "0")
	lagging := (c.leader() + 1) % 3
	for i := range 20 { // some entries of the lagging member's own log
		c.set(fmt.Sprint("old", i), "x")
	}
	c.crash(lagging)
	for i := range 200 {
		c.set(fmt.Sprint("k", i), fmt.Sprint(i))
	}
	lead := c.rs[c.leader()]
	lead.snaps.wait()
	if first, _ := lead.storage.FirstIndex(); first <= 22 {
		t.Fatalf("the leader's log still starts at %d: the test needs it compacted past the lagging member", first)
	}
	c.start(lagging)
	c.set("after", "1")
	check := func() {
		for k := range 200 {
			if v, err := c.read(lagging, fmt.Sprint("k", k)); err != nil || v != fmt.Sprint(k) {
				t.Fatalf("lagging member: k%d = %q (%v)", k, v, err)
			}
		}
		for _, kv := range [][2]string{{"before", "0"}, {"old7", "x"}, {"after", "1"}} {
			if v, err := c.read(lagging, kv[0]); err != nil || v != kv[1] {
				t.Fatalf("lagging member: %s = %q (%v), want %s", kv[0], v, err, kv[1])
			}
		}
	}
	check()
	if got := c.rs[lagging].snaps.newest().index; got <= 22 {
		t.Fatalf("the lagging member's newest snapshot is at %d: it caught up without one", got)
	}
	c.crash(lagging)
	c.start(lagging)
	check()
}

// join adds a new member, id n+1, to the cluster's network and opens it to
// join the group; it returns its index.
func (c *cluster) join() int {
	c.t.Helper()
	i := len(c.rs)
	c.fs, c.incs = append(c.fs, vfs.NewMem()), append(c.incs, uint64(i+1)<<32|1)
	c.hs = append(c.hs, &transporttest.Switch{})
	c.eps = append(c.eps, c.net.Register(uint64(i+1), c.hs[i]))
	c.rs = append(c.rs, nil)
	opt := c.opt
	opt.FS, opt.Dir, opt.Logger, opt.ID, opt.Join, opt.Peers = c.fs[i], "data", memberLogger(i+1), uint64(i+1), true, c.peers(i)
	opt.Incarnation = c.incs[i]
	r, err := Open(opt)
	if err != nil {
		c.t.Fatalf("member %d: %v", i+1, err)
	}
	c.rs[i] = r
	c.hs[i].Set(r)
	return i
}

// TestClusterMembership adds a fourth member (a learner, caught up by the
// leader's snapshot and log, then promoted), removes an original one (it
// stops with ErrRemoved), transfers leadership to the new member, and
// checks that every member left holds every write and the same
// configuration and member info. Then it checks the refusals of changes
// that name no member or a learner, that AddMember resumes adding a
// learner, and that the leader may remove itself.
func TestClusterMembership(t *testing.T) {
	c := newCluster(t, 3, seedtest.Seed(t))
	for i := range 20 {
		c.set(fmt.Sprint("k", i), fmt.Sprint(i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := c.join()
	if err := c.rs[c.leader()].AddMember(ctx, 4, []byte("member-4-info")); err != nil {
		t.Fatal(err)
	}
	c.set("after-add", "1")
	if v, err := c.read(n, "k7"); err != nil || v != "7" {
		t.Fatalf("the new member: k7 = %q (%v)", v, err)
	}
	gone := (c.leader() + 1) % 3
	if err := c.rs[c.leader()].Remove(ctx, uint64(gone+1)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.rs[gone].Dead():
		if !errors.Is(c.rs[gone].Err(), ErrRemoved) {
			t.Fatalf("the removed member stopped with %v, want ErrRemoved", c.rs[gone].Err())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the removed member did not stop")
	}
	c.stop(gone)
	if err := c.rs[c.leader()].AddLearner(ctx, uint64(gone+1), []byte("again")); !errors.Is(err, ErrIDTaken) {
		t.Fatalf("adding removed member %d again = %v, want ErrIDTaken", gone+1, err)
	}
	if err := c.rs[c.leader()].TransferLeadership(ctx, 4); err != nil {
		t.Fatal(err)
	}
	c.set("after-transfer", "2")
	for i, r := range c.rs {
		if r == nil {
			continue
		}
		for _, kv := range [][2]string{{"k19", "19"}, {"after-add", "1"}, {"after-transfer", "2"}} {
			if v, err := c.read(i, kv[0]); err != nil || v != kv[1] {
				t.Fatalf("member %d: %s = %q (%v), want %s", i+1, kv[0], v, err, kv[1])
			}
		}
		if got := string(r.Members()[4]); got != "member-4-info" {
			t.Fatalf("member %d knows member 4 as %q", i+1, got)
		}
		if st, err := r.Status(ctx); err != nil || len(st.Config.Voters[0]) != 3 {
			t.Fatalf("member %d: voters %v (%v), want 3", i+1, st.Config.Voters, err)
		}
	}
	// Changes that name no member, or leadership for a learner, are
	// refused; adding a learner again with its info resumes its addition.
	ld := c.rs[c.leader()]
	if err := ld.Remove(ctx, 99); !errors.Is(err, ErrNoMember) {
		t.Fatalf("removing member 99 = %v, want ErrNoMember", err)
	}
	if err := ld.TransferLeadership(ctx, 99); !errors.Is(err, ErrNoMember) {
		t.Fatalf("transferring to member 99 = %v, want ErrNoMember", err)
	}
	five := c.join()
	if err := ld.AddLearner(ctx, 5, []byte("member-5-info")); err != nil {
		t.Fatal(err)
	}
	if err := ld.TransferLeadership(ctx, 5); !errors.Is(err, ErrLearner) {
		t.Fatalf("transferring to learner 5 = %v, want ErrLearner", err)
	}
	if err := ld.AddMember(ctx, 5, []byte("other-info")); !errors.Is(err, ErrIDTaken) {
		t.Fatalf("adding learner 5 with other info = %v, want ErrIDTaken", err)
	}
	if err := ld.AddMember(ctx, 5, []byte("member-5-info")); err != nil {
		t.Fatalf("adding learner 5 again: %v", err)
	}
	if v, err := c.read(five, "after-transfer"); err != nil || v != "2" {
		t.Fatalf("member 5: after-transfer = %q (%v)", v, err)
	}

	// The leader removes itself: the call succeeds, the leader stops, and
	// the three left elect another. Until it is closed, the former leader
	// refuses writes and reads as a member that does not lead: it proposes
	// nothing.
	lead := c.leader()
	if err := c.rs[lead].Remove(ctx, uint64(lead+1)); err != nil {
		t.Fatalf("the leader removing itself: %v", err)
	}
	if !errors.Is(c.rs[lead].Err(), ErrRemoved) {
		t.Fatalf("the removed leader: %v, want ErrRemoved", c.rs[lead].Err())
	}
	var b store.Batch
	b.Add(store.OpSet, 0, []byte("k"), []byte("v"))
	if err := c.rs[lead].Apply(ctx, b.Bytes(), func(int, store.Result) {}); !errors.Is(err, ErrNotLeader) || !errors.Is(err, ErrRemoved) {
		t.Fatalf("a write at the removed leader: %v, want ErrNotLeader and ErrRemoved", err)
	}
	if err := c.rs[lead].ReadBarrier(ctx); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("a read at the removed leader: %v, want ErrNotLeader", err)
	}
	c.stop(lead)
	c.set("after-leader-removed", "3")
}

// TestClusterNoLeader stops two of three members: the third, once it knows
// no leader, fails writes and reads with ErrNoLeader after LeaderWait,
// rather than making them wait for ever.
func TestClusterNoLeader(t *testing.T) {
	c := newCluster(t, 3, seedtest.Seed(t))
	c.set("k", "0")
	left := c.leader()
	c.stop((left + 1) % 3)
	c.stop((left + 2) % 3)
	for deadline := time.Now().Add(10 * time.Second); c.rs[left].Leader() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the member left alone still knows a leader after 10 s")
		}
	}
	if err := c.setAt(left, 10*time.Second, "k", "1"); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("a write with no leader = %v, want ErrNoLeader", err)
	}
	if _, err := c.read(left, "k"); !errors.Is(err, ErrNoLeader) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a read with no leader = %v, want ErrNoLeader before the caller's deadline", err)
	}
}

// TestClusterNoQuorum isolates the leader of three members: it cannot
// commit, so its writes end with ErrOutcomeUnknown or ErrNotLeader once it
// steps down (CheckQuorum), never with a success; the majority elects a
// new leader. Reads at the isolated member wait, then fail.
func TestClusterNoQuorum(t *testing.T) {
	c := newCluster(t, 3, seedtest.Seed(t))
	c.set("k", "0")
	old := c.leader()
	c.net.Isolate(uint64(old + 1))
	err := c.setAt(old, 2*time.Second, "k", "isolated")
	if err == nil {
		t.Fatal("an isolated leader acknowledged a write")
	}
	if !errors.Is(err, ErrOutcomeUnknown) && !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrNoLeader) {
		t.Fatalf("a write at an isolated leader = %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := c.rs[old].ReadBarrier(ctx); err == nil {
		// It may still believe it leads for an election timeout, but a
		// read index needs a majority's answer.
		t.Fatal("an isolated member passed a read barrier")
	}
	c.net.Heal()
	c.set("k", "1")
	for i := range c.rs {
		if v, err := c.read(i, "k"); err != nil || v != "1" {
			t.Fatalf("member %d: k = %q (%v), want 1", i+1, v, err)
		}
	}
}

// TestClusterRandomFaults runs writers against five members while the
// network drops, duplicates, delays and reorders messages and the test
// partitions it and crashes members at random (never more than two down
// or cut off at once). Every acknowledged write must be the value read at
// the end, unless a later write of the same key was attempted.
func TestClusterRandomFaults(t *testing.T) {
	seed := seedtest.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 7))
	c := newCluster(t, 5, seed)
	c.net.SetFaults(transporttest.Faults{Drop: 0.02, Duplicate: 0.02, Reorder: 0.02, MaxDelay: 2 * time.Millisecond})
	const keys, rounds = 8, 100
	acked := make([]int, keys)     // the last acknowledged value of each key, or -1
	attempted := make([]int, keys) // the last value tried
	for k := range acked {
		acked[k], attempted[k] = -1, -1
	}
	nacked := 0
	for round := range rounds {
		c.fault(rng)
		for range 5 {
			k := rng.IntN(keys)
			v := attempted[k] + 1
			attempted[k] = v
			i := c.pick(rng)
			if c.rs[i] == nil {
				continue
			}
			if err := c.setAt(i, 200*time.Millisecond, fmt.Sprint("k", k), fmt.Sprint(v)); err == nil {
				acked[k], nacked = v, nacked+1
			} else if !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrOutcomeUnknown) &&
				!errors.Is(err, ErrNoLeader) && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("round %d: write at member %d: %v", round, i+1, err)
			}
		}
	}
	t.Logf("%d writes acknowledged; the last of each key %v, of %v tried", nacked, acked, attempted)
	c.net.Heal()
	c.net.SetFaults(transporttest.Faults{})
	for i := range c.rs {
		if c.rs[i] == nil {
			c.start(i)
		}
	}
	for k := range keys {
		v, err := c.read(c.leader(), fmt.Sprint("k", k))
		if err != nil {
			t.Fatal(err)
		}
		got := -1
		if v != "<nil>" {
			fmt.Sscan(v, &got)
		}
		if got < acked[k] || got > attempted[k] {
			t.Fatalf("k%d = %s, but %d was acknowledged and %d the last tried", k, v, acked[k], attempted[k])
		}
	}
}

// pick returns, half the time, a member that believes it leads, if one is
// up, and otherwise any member.
func (c *cluster) pick(rng *rand.Rand) int {
	if rng.IntN(2) == 0 {
		for i, r := range c.rs {
			if r != nil && r.Leader() == r.id {
				return i
			}
		}
	}
	return rng.IntN(len(c.rs))
}

// fault changes the faults at random: heal, partition off one or two
// members, or crash or restart one, keeping a majority up and connected.
func (c *cluster) fault(rng *rand.Rand) {
	down := 0
	for _, r := range c.rs {
		if r == nil {
			down++
		}
	}
	switch rng.IntN(4) {
	case 0:
		c.net.Heal()
	case 1:
		if down == 0 {
			a, b := uint64(rng.IntN(5)+1), uint64(rng.IntN(5)+1)
			var rest []uint64
			for _, v := range c.voters {
				if v != a && v != b {
					rest = append(rest, v)
				}
			}
			c.net.Partition([]uint64{a, b}, rest)
		}
	case 2:
		if i := rng.IntN(len(c.rs)); c.rs[i] != nil && down < 2 {
			c.net.Heal() // so that two down and two cut off never meet
			c.crash(i)
		}
	case 3:
		for i, r := range c.rs {
			if r == nil {
				c.start(i)
				break
			}
		}
	}
}

// wipe stops member i and gives it an empty filesystem, as a node whose
// data directory was wiped, with a new incarnation.
func (c *cluster) wipe(i int) {
	c.stop(i)
	c.fs[i] = vfs.NewMem()
	c.incs[i] += 2
}

// awaitDataLost waits until member i stops with ErrDataLost whose message
// holds want.
func (c *cluster) awaitDataLost(i int, want string) {
	c.t.Helper()
	select {
	case <-c.rs[i].Dead():
		if err := c.rs[i].Err(); !errors.Is(err, ErrDataLost) || !strings.Contains(err.Error(), want) {
			c.t.Fatalf("member %d stopped with %v, want ErrDataLost saying %q", i+1, err, want)
		}
	case <-time.After(20 * time.Second):
		c.t.Fatalf("member %d, wiped, did not stop", i+1)
	}
	c.stop(i)
}

// TestClusterWipedMember starts a member of three again under its id on
// an empty filesystem (with a new incarnation). While the leader remembers
// what it acknowledged, its first heartbeat says so, and the member stops
// with ErrDataLost rather than raft's panic. Once every other member has
// restarted, so that no one remembers, it catches up as any new directory
// would, but its registration is of another incarnation than the group
// knows: the others mark it lost and refuse its votes, it stops with
// ErrDataLost once it learns the group's record, and the two left go on,
// remembering it across a snapshot and a restart.
func TestClusterWipedMember(t *testing.T) {
	c := newCluster(t, 3, seedtest.Seed(t))
	for i := range 20 {
		c.set(fmt.Sprint("k", i), "1")
	}
	w := (c.leader() + 1) % 3
	for deadline := time.Now().Add(20 * time.Second); !c.rs[w].registered.Load(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("member %d did not register in 20 s", w+1)
		}
	}
	c.wipe(w)
	c.start(w)
	c.awaitDataLost(w, "counts it as holding the log up to index")

	c.wipe(w)
	for i := range c.rs {
		if i != w {
			c.stop(i)
			c.start(i)
		}
	}
	c.set("before", "2")
	c.start(w)
	c.awaitDataLost(w, "the group knows member")
	c.set("after", "3")
	for i := range c.rs {
		if i == w {
			continue
		}
		for deadline := time.Now().Add(10 * time.Second); !c.rs[i].LostMember(uint64(w + 1)); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("member %d does not know member %d as lost", i+1, w+1)
			}
		}
		if err := c.rs[i].Snapshot(); err != nil {
			t.Fatal(err)
		}
		c.stop(i)
		c.start(i)
		if !c.rs[i].LostMember(uint64(w + 1)) {
			t.Fatalf("member %d, restarted from its snapshot, forgot that member %d is lost", i+1, w+1)
		}
		if v, err := c.read(i, "after"); err != nil || v != "3" {
			t.Fatalf("member %d: after = %q (%v)", i+1, v, err)
		}
	}
}

// TestClusterLeaderDiskFull fills the leader's disk: it hands leadership to
// a follower, the group goes on acknowledging writes without it, and once
// space is freed it catches up and holds them all.
func TestClusterLeaderDiskFull(t *testing.T) {
	c := newCluster(t, 3, seedtest.Seed(t))
	for i := range 10 {
		c.set(fmt.Sprint("a", i), "1")
	}
	full := c.leader()
	mem := c.fs[full]
	mem.SetCapacity(usage(mem) + 100)
	stuck := make(chan error, 1)
	go func() { // finds the disk full
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		stuck <- c.rs[full].Apply(ctx, batchOf("big", strings.Repeat("x", 1000)), nil)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for c.leader() == full {
		if time.Now().After(deadline) {
			t.Fatalf("member %d, its disk full, still leads after 20 s", full+1)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i := range 10 {
		c.set(fmt.Sprint("b", i), "2")
	}
	if err := <-stuck; err != nil && !errors.Is(err, ErrOutcomeUnknown) && !errors.Is(err, ErrNoSpace) {
		t.Fatalf("the write that found the leader's disk full = %v, want nil, ErrOutcomeUnknown or ErrNoSpace", err)
	}
	mem.SetCapacity(0)
	for k := range 10 {
		for _, kv := range [][2]string{{fmt.Sprint("a", k), "1"}, {fmt.Sprint("b", k), "2"}} {
			if v, err := c.read(full, kv[0]); err != nil || v != kv[1] {
				t.Fatalf("member %d, space freed: %s = %q (%v), want %s", full+1, kv[0], v, err, kv[1])
			}
		}
	}
}
