package check

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/flintkv/flint/internal/shardmap"
	"github.com/flintkv/flint/internal/slot"
)

// nemesis injects faults into the servers the checker started, on a
// schedule drawn from the seed: after a random wait of 0.5 to 1.5
// intervals, one of its faults, and again until the workload ends. The
// faults are dealt in rounds, each a random order of all of them, so that
// every fault strikes within any len(faults) strikes in a row from the
// start of a round. Config's Fault constants say what each fault does. In
// a sharded cluster each fault strikes one data group, chosen at random,
// as it would strike the group alone; the managers are left alone but for
// kill-manager (see managers.go). On hosted nodes, faults strike nodes
// (see hosted.go).
//
// Faults that take members down (kill, kill-leader) leave at most a
// minority of a group down at once, so that the group can go on; the
// others (partitions, pauses) may leave it without a majority for a
// while, and it must then wait, not err.
type nemesis struct {
	fl       *fleet
	faults   []Fault
	interval time.Duration
	pauseMax time.Duration // pauses last from pauseMax/20 to pauseMax
	rng      *rand.Rand
	deck     []Fault // the rest of this round's faults, in the order they strike
	rec      *recorder
	log      io.Writer
	hot      []int // the slots of the workload's keys, which move-slots moves most often
}

// run injects faults until ctx ends. It returns with no fault under way:
// every member is running, not paused, and not cut off. An error means a
// member did not come back after a kill, exited on its own, or a
// membership change failed.
func (n *nemesis) run(ctx context.Context) error {
	for {
		wait := n.interval/2 + time.Duration(n.rng.Int64N(int64(n.interval)))
		select {
		case <-ctx.Done():
			return n.settle()
		case <-time.After(wait):
		}
		if err := n.fl.restartDue(false); err != nil {
			return err
		}
		if err := n.fl.exited(); err != nil {
			return err
		}
		f := n.next()
		cls := n.fl.clusters()
		cl := cls[0]
		if len(cls) > 1 {
			cl = cls[n.rng.IntN(len(cls))]
		}
		if err := n.inject(f, cl); err != nil {
			return err
		}
	}
}

// next returns the next fault to inject, dealing a new round when the
// last is done.
func (n *nemesis) next() Fault {
	if len(n.deck) == 0 {
		n.deck = slices.Clone(n.faults)
		n.rng.Shuffle(len(n.deck), func(i, j int) { n.deck[i], n.deck[j] = n.deck[j], n.deck[i] })
	}
	f := n.deck[0]
	n.deck = n.deck[1:]
	return f
}

// settle ends the faults still under way: it restarts the members that
// are down and, in a sharded cluster, waits until the managers' map lists
// no move.
func (n *nemesis) settle() error {
	start := n.rec.now()
	down := n.fl.down()
	if err := n.fl.restartDue(true); err != nil {
		return err
	}
	if down > 0 {
		n.record("restart", start)
	}
	if n.fl.sharded() {
		if err := n.fl.awaitMoves(); err != nil {
			return err
		}
	}
	return n.fl.exited()
}

// inject injects fault f into cl, waits until it is over (a killed member
// of a group stays down past that, until restartDue), and records it; in a
// sharded cluster, with the group it struck. On hosted nodes kill, pause,
// kill-leader and partition strike nodes, and the other faults a group
// drawn at random.
func (n *nemesis) inject(f Fault, cl *cluster) error {
	start := n.rec.now()
	kind := string(f)
	group := cl.group
	hosted := cl.hosted != nil
	if hosted && (f == FaultMoveSlots || f == FaultMembership || f == FaultWipe || f == FaultSplit) {
		group = uint64(1 + n.rng.IntN(len(cl.hosted)))
	}
	var err error
	switch {
	case f == FaultKillManager:
		group = 0
		kind, err = n.killManager()
	case f == FaultKill:
		kind, err = n.kill(cl, kind, n.pick(cl.running()))
	case f == FaultKillLeader:
		var lead *member
		if lead, err = n.leaderToKill(cl); err == nil {
			kind, err = n.kill(cl, kind, lead)
		}
	case f == FaultPause:
		err = n.pause(n.pickLeaderOften(cl))
	case f == FaultPartition:
		kind, err = n.partition(cl)
	case f == FaultMoveSlots:
		kind, err = n.moveSlots(group)
	case hosted && f == FaultMembership:
		kind, err = n.hostedMembership(cl, group)
	case hosted && f == FaultWipe:
		kind, err = n.hostedWipe(cl, group)
	case hosted && f == FaultSplit:
		kind, err = n.hostedSplit(cl, group)
	case f == FaultMembership:
		kind, err = n.membership(cl)
	case f == FaultWipe:
		kind, err = n.wipe(cl)
	case f == FaultSplit:
		kind, err = n.split(cl)
	}
	if group != 0 {
		kind += fmt.Sprintf(" (group %d)", group)
	}
	if err != nil {
		return fmt.Errorf("nemesis %s: %w", kind, err)
	}
	n.record(kind, start)
	return nil
}

// leaderToKill returns the member of cl that kill-leader kills: the
// group's leader; of hosted nodes, the node that leads the most groups
// half the time, else the one that leads a group drawn at random.
func (n *nemesis) leaderToKill(cl *cluster) (*member, error) {
	if cl.hosted != nil && n.rng.IntN(2) == 0 {
		return cl.groupLeader(uint64(1+n.rng.IntN(len(cl.hosted))), 5*time.Second)
	}
	return cl.leader(5 * time.Second)
}

// pick returns one of ms at random, or nil if there is none.
func (n *nemesis) pick(ms []*member) *member {
	if len(ms) == 0 {
		return nil
	}
	return ms[n.rng.IntN(len(ms))]
}

// pickLeaderOften returns a running member of cl: in a group, the leader
// half of the time (a stalled leader is the harder case), else one at
// random.
func (n *nemesis) pickLeaderOften(cl *cluster) *member {
	if cl.replicated() && n.rng.IntN(2) == 0 {
		if lead, err := cl.leader(2 * time.Second); err == nil {
			return lead
		}
	}
	return n.pick(cl.running())
}

// kill kills m, a member of cl, with SIGKILL. A single server restarts
// after up to 100 ms; a member of a group stays down for 1.5 to 2.5
// intervals (restartDue), past the next fault, so that kills one after
// another take down two members of five, unless that would leave a
// majority down: then it restarts at once. It returns the fault's
// description: kind, and for a group, the member and how many are down
// with it.
func (n *nemesis) kill(cl *cluster, kind string, m *member) (string, error) {
	if m == nil {
		return kind, nil
	}
	if err := m.srv.kill(); err != nil {
		return kind, err
	}
	if !cl.replicated() {
		time.Sleep(time.Duration(n.rng.Int64N(int64(100 * time.Millisecond))))
		return kind, m.srv.start()
	}
	if cl.quorumLost(m) {
		time.Sleep(time.Duration(n.rng.Int64N(int64(100 * time.Millisecond))))
		return fmt.Sprintf("%s %d, restarted at once", kind, m.id), m.srv.start()
	}
	down := len(cl.members) - len(cl.running()) + 1
	m.down = time.Now().Add(3*n.interval/2 + time.Duration(n.rng.Int64N(int64(n.interval))))
	return fmt.Sprintf("%s %d, %d down", kind, m.id, down), nil
}

// pause stops m with SIGSTOP and continues it with SIGCONT after
// pauseMax/20 to pauseMax.
func (n *nemesis) pause(m *member) error {
	if m == nil {
		return nil
	}
	if err := m.srv.pause(); err != nil {
		return err
	}
	time.Sleep(n.pauseMax/20 + time.Duration(n.rng.Int64N(int64(n.pauseMax*19/20))))
	return m.srv.resume()
}

// finalKill kills every member of every group with SIGKILL once the
// workload is over and restarts them, so that the final reads show what
// survives a crash at a quiet moment, when every write the servers hold
// was acknowledged. A sharded cluster's managers, which hold no keys,
// stay up.
func (n *nemesis) finalKill() error {
	start := n.rec.now()
	for _, cl := range n.fl.clusters() {
		for _, m := range cl.members {
			if err := m.srv.kill(); err != nil {
				return err
			}
		}
	}
	for _, cl := range n.fl.clusters() {
		for _, m := range cl.members {
			if err := m.srv.start(); err != nil {
				return n.fl.inGroup(cl, fmt.Errorf("member %d: restart after the final kill -9: %w", m.id, err))
			}
		}
	}
	n.record("final-kill", start)
	return nil
}

// partition cuts cl's peer traffic in one of these shapes, for 0.5
// to 1.5 intervals, then heals it:
//
//   - halves: a random minority and the majority cannot reach each other;
//   - isolate-leader: the leader and the others cannot reach each other;
//   - bridge: two halves cannot reach each other, but one member reaches
//     both (and is the only way a leader can keep a majority);
//   - one-way: one member (the leader half the time) hears no one, or no
//     one hears it, while the other direction works.
//
// It returns the shape and its sides, for the log.
func (n *nemesis) partition(cl *cluster) (string, error) {
	ids := make([]uint64, 0, len(cl.members))
	for _, m := range cl.members {
		ids = append(ids, m.id)
	}
	n.rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	if n.rng.IntN(2) == 0 { // the leader first, for the shapes that single one out
		if lead, err := cl.leader(2 * time.Second); err == nil {
			i := slices.Index(ids, lead.id)
			ids[0], ids[i] = ids[i], ids[0]
		}
	}
	cut := map[[2]uint64]bool{}
	sever := func(a, b []uint64, both bool) {
		for _, x := range a {
			for _, y := range b {
				cut[[2]uint64{x, y}] = true
				if both {
					cut[[2]uint64{y, x}] = true
				}
			}
		}
	}
	var shape string
	switch n.rng.IntN(4) {
	case 0:
		k := 1 + n.rng.IntN((len(ids)-1)/2)
		sever(ids[:k], ids[k:], true)
		shape = fmt.Sprintf("halves %v | %v", ids[:k], ids[k:])
	case 1:
		lead, err := cl.leader(5 * time.Second)
		if err != nil {
			return "partition", err
		}
		i := slices.Index(ids, lead.id)
		rest := slices.Delete(slices.Clone(ids), i, i+1)
		sever([]uint64{lead.id}, rest, true)
		shape = fmt.Sprintf("isolate-leader %d | %v", lead.id, rest)
	case 2:
		rest := ids[1:]
		a, b := rest[:len(rest)/2], rest[len(rest)/2:]
		sever(a, b, true)
		shape = fmt.Sprintf("bridge %v | %d | %v", a, ids[0], b)
	default:
		if n.rng.IntN(2) == 0 {
			sever(ids[1:], ids[:1], false)
			shape = fmt.Sprintf("one-way: %d hears no one", ids[0])
		} else {
			sever(ids[:1], ids[1:], false)
			shape = fmt.Sprintf("one-way: no one hears %d", ids[0])
		}
	}
	cl.partition(cut)
	time.Sleep(n.interval/2 + time.Duration(n.rng.Int64N(int64(n.interval))))
	cl.partition(nil)
	return "partition " + shape, nil
}

// membership changes cl's members online, one of two ways: it removes a
// member and adds a new one (a member, once removed, never comes back under
// its id), or adds a new one and then removes an old one. The member
// removed may be the leader. Members that are down are restarted first, so
// that the change has a majority. In a sharded cluster it is always the
// first way, since the new member takes over the client address of the
// one removed (see cluster.replace).
func (n *nemesis) membership(cl *cluster) (string, error) {
	if err := cl.restartDue(true); err != nil {
		return "membership", err
	}
	old := n.pick(cl.members)
	if n.rng.IntN(2) == 0 || cl.group != 0 {
		m, err := cl.replace(old)
		if err != nil {
			return "membership", err
		}
		return fmt.Sprintf("membership: removed %d, added %d", old.id, m.id), nil
	}
	m, err := cl.join("")
	if err != nil {
		return "membership", err
	}
	if err := cl.remove(old); err != nil {
		return "membership", err
	}
	return fmt.Sprintf("membership: added %d, removed %d", m.id, old.id), nil
}

// wipe makes a member lose its disk: it is killed, its data directory
// deleted, and, since a member id is never reused, the member is removed
// and comes back as a new member that catches up from the others.
func (n *nemesis) wipe(cl *cluster) (string, error) {
	if err := cl.restartDue(true); err != nil {
		return "wipe", err
	}
	old := n.pick(cl.members)
	if err := old.srv.kill(); err != nil {
		return "wipe", err
	}
	old.down = time.Now().Add(time.Hour) // removed before it is due
	if err := os.RemoveAll(filepath.Join(filepath.Dir(old.srv.log), "data")); err != nil {
		return "wipe", err
	}
	m, err := cl.replace(old)
	if err != nil {
		return "wipe", err
	}
	return fmt.Sprintf("wipe %d, rejoined as %d", old.id, m.id), nil
}

// moveSlotsTimeout bounds one move-slots fault.
const moveSlotsTimeout = 2 * time.Minute

// moveSlots moves a random range of 1 to 256 slots to group to, online,
// as `flint cluster move-slots` does, after restarting the members that
// are down so that the groups it takes slots from can take its steps. Most
// ranges hold a slot of the workload's keys. Slots that the group owns
// already stay; the others come from whichever groups own them, so that
// over many faults slots go back and forth.
func (n *nemesis) moveSlots(to uint64) (string, error) {
	if err := n.fl.restartDue(true); err != nil {
		return "move-slots", err
	}
	first := n.rng.IntN(slot.Count)
	if len(n.hot) > 0 && n.rng.IntN(4) > 0 {
		first = max(n.hot[n.rng.IntN(len(n.hot))]-n.rng.IntN(128), 0)
	}
	last := min(first+n.rng.IntN(256), slot.Count-1)
	killed, err := n.duringMove(func(ctx context.Context) error { return n.fl.admin().MoveSlots(ctx, first, last, to) })
	return fmt.Sprintf("move-slots %d-%d%s", first, last, killed), err
}

// split starts a new data group and moves half of cl's slots to it, as
// `flint cluster add-group` does, after restarting the members that are
// down. With MaxGroups groups already, it moves slots instead.
func (n *nemesis) split(cl *cluster) (string, error) {
	if len(n.fl.groups) >= MaxGroups {
		return n.moveSlots(cl.group)
	}
	if err := n.fl.restartDue(true); err != nil {
		return "split", err
	}
	c, err := n.fl.addGroup()
	if err != nil {
		return "split", err
	}
	kind := fmt.Sprintf("split: new group %d", c.group)
	var members []shardmap.Member
	for i, m := range c.members {
		members = append(members, shardmap.Member{ID: max(m.id, uint64(i+1)), Addr: m.srv.addr})
	}
	killed, err := n.duringMove(func(ctx context.Context) error { return n.fl.admin().AddGroup(ctx, c.group, members, cl.group) })
	return kind + killed, err
}

func (n *nemesis) record(kind string, start int64) {
	end := n.rec.now()
	n.rec.addFault(faultSpan{Kind: kind, Start: start, End: end})
	fmt.Fprintf(n.log, "nemesis: %s at %v, over after %v\n", strings.TrimSpace(kind),
		time.Duration(start).Round(time.Millisecond), time.Duration(end-start).Round(time.Millisecond))
}
