package node_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flintkv/flint/client"
	"github.com/flintkv/flint/internal/ask"
	"github.com/flintkv/flint/internal/clusterctl"
	"github.com/flintkv/flint/internal/seedtest"
	"github.com/flintkv/flint/internal/shardmap"
	"github.com/flintkv/flint/internal/slot"
	"github.com/flintkv/flint/internal/transport/transporttest"
)

// TestShardedSim runs a sharded cluster in one process (simCluster: a
// meta group and three data groups of three members, on in-memory
// filesystems and networks) under clients of Flint's Go client, in
// sessions, that INCR counters, SET unique values and APPEND unique
// tokens on keys spread over every slot, recording which writes were
// acknowledged. Meanwhile an operator moves slot ranges between the groups
// (clusterctl.MoveSlots), splits one with a fourth group started
// in-process (AddGroup) and records a last move in the map that no one
// runs move-slots for (the managers' leader must take its steps, as after
// a move-slots killed), and a nemesis isolates, cuts off and crashes
// members, leaders half the time, of every group, the meta group's too,
// one member of a group at a time, while every network drops, duplicates,
// delays and reorders messages. Once the faults are healed and the
// operator is done, the test checks that:
//
//   - every member of each group holds the same keys, values, sessions
//     and slot-move records;
//   - every key lives in the group the final map gives its slot, and only
//     there, and the client reads what the groups hold;
//   - each counter is at least its acknowledged INCRs and at most its
//     attempted ones; each SET key holds its last acknowledged value or a
//     later attempted one; each APPEND key holds every acknowledged token
//     once, in order, and otherwise only attempted tokens, each at most
//     once; no other key exists.
//
// The seed is logged; -seed replays the network's fault draws, the
// clients' choices of keys and commands, the operator's moves and the
// nemesis's choices of fault, group and member, in each one's own order.
// It does not replay their timing: goroutine scheduling, when each fault
// strikes relative to the clients' commands, and the loopback TCP traffic
// of the clients, the managers' polls and the moves are the machine's.
func TestShardedSim(t *testing.T) {
	seed := seedtest.Seed(t)
	c := newSimCluster(t, seed, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, g := range c.all() {
		g.net.SetFaults(transporttest.Faults{Drop: 0.01, Duplicate: 0.01, Reorder: 0.01, MaxDelay: time.Millisecond})
	}
	ctl, err := clusterctl.Dial(clusterctl.Config{Addrs: c.managers()})
	if err != nil {
		t.Fatal(err)
	}
	awaitMap(t, ctx, ctl)

	w := startSimWriters(t, ctx, c, seed, 4)
	nem := startNemesis(c, rand.New(rand.NewPCG(seed, 2)))
	t.Cleanup(func() { nem.finish(); w.finish() }) // if the test stops early
	start := time.Now()
	operate(t, ctx, c, ctl, rand.New(rand.NewPCG(seed, 3)))
	time.Sleep(simMinFaults - time.Since(start)) // faults for at least that long
	t.Logf("faults dealt: %v", nem.finish())
	if err := c.heal(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // writes with every fault healed
	models := w.finish()
	if t.Failed() {
		return
	}

	final := finalMap(t, ctx, ctl, 0)
	held := map[string][]byte{}
	for _, g := range c.all() {
		dump := g.agree(t, ctx)
		if g.id == 0 {
			continue
		}
		for k, v := range dump {
			if o := final.Owner(slot.Of([]byte(k))); o == nil || o.ID != g.id {
				t.Errorf("key %q (slot %d) is in group %d, but the final map gives its slot to %v", k, slot.Of([]byte(k)), g.id, o)
			}
			if _, ok := held[k]; ok {
				t.Errorf("key %q is in two groups", k)
			}
			held[k] = v
		}
	}
	checkModels(t, models, held)
	readBack(t, ctx, c, held)
}

// The nemesis runs for at least simMinFaults, if the operator's changes
// take less, and at most simMaxFaults.
const simMinFaults, simMaxFaults = 6 * time.Second, 20 * time.Second

// awaitMap waits until the managers serve a map.
func awaitMap(t *testing.T, ctx context.Context, ctl *clusterctl.Group) {
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err = ctl.ShardStatus(ctx); err == nil {
			return
		}
	}
	t.Fatalf("the managers serve no map after 30 s: %v", err)
}

// operate moves slots, splits the fullest group with a new group 4, and
// moves slots twice more, each change resumed after a failure, as an
// operator would run `flint cluster move-slots` again. Each move takes a
// range of 500 to 3000 slots from the group that owns its first slot (and
// from any other that owns some of it) to another. The last move is
// recorded in the map and left there, as a move-slots killed once it
// recorded it would leave it: the managers must finish it on their own.
func operate(t *testing.T, ctx context.Context, c *simCluster, ctl *clusterctl.Group, rng *rand.Rand) {
	groups := []uint64{1, 2, 3}
	move := func(abandon bool) {
		n := 500 + rng.IntN(2500)
		first := rng.IntN(slot.Count - n)
		sh, err := ctl.ShardStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		others := slices.DeleteFunc(slices.Clone(groups), func(id uint64) bool { return id == sh.Map.Owner(first).ID })
		to := others[rng.IntN(len(others))]
		if abandon {
			abandonMove(t, ctx, c, ctl, sh.Map, first, first+n-1, to)
			return
		}
		change(t, ctx, fmt.Sprintf("move slots %d-%d to group %d", first, first+n-1, to), func(ctx context.Context) error {
			return ctl.MoveSlots(ctx, first, first+n-1, to)
		})
	}
	move(false)
	g := c.newGroup(4)
	c.start(g)
	groups = append(groups, 4)
	change(t, ctx, "add group 4", func(ctx context.Context) error { return ctl.AddGroup(ctx, 4, g.mapMembers(), 0) })
	move(false)
	move(true)
}

// abandonMove records in the map, as move-slots's first step does, a
// move to group to of the slots from first up to last that first's group
// owns in a row, and waits, with no one running move-slots again, until
// the managers have finished it: the map lists no move and gives the
// slots to group to. Once the source has logged the move's first step
// (the leading manager is taking them), it crashes that manager and
// starts it again: the one that leads next must go on from there.
func abandonMove(t *testing.T, ctx context.Context, c *simCluster, ctl *clusterctl.Group, m *shardmap.Map, first, last int, to uint64) {
	from := m.Owner(first).ID
	for s := first; s <= last; s++ {
		if m.Owner(s).ID != from {
			last = s - 1
		}
	}
	r := shardmap.Range{First: first, Last: last}
	next, err := m.WithMoves([]shardmap.Move{{Slots: r, From: from, To: to}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	recorded := false
	for try := 0; try < 100 && !recorded; try++ {
		for _, addr := range c.managers() {
			if v, err := ask.One(ctx, addr, "", "FLINT.MAPSET", string(next.Encode())); err == nil && v.Int == 1 {
				recorded = true
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !recorded {
		t.Fatalf("no manager took the map with the move of slots %d-%d to group %d", first, last, to)
	}
	start := time.Now()
	crashDriver(t, ctx, c, next.Epoch, from, first)
	final := finalMap(t, ctx, ctl, next.Epoch)
	t.Logf("move of slots %d-%d to group %d, left in the map: finished by the managers in %v", first, last, to,
		time.Since(start).Round(time.Millisecond))
	for s := first; s <= last; s++ {
		if o := final.Owner(s); o == nil || o.ID != to {
			t.Fatalf("slot %d belongs to %v after the managers finished its move to group %d", s, o, to)
		}
	}
}

// crashDriver waits until a member of group from holds a record of slot
// first that is Leaving or Gone, then crashes the manager that leads the
// meta group and starts it again. It does nothing if the move has passed
// those steps first (a map after epoch recorded, which listed it, lists
// no move) or no manager leads.
func crashDriver(t *testing.T, ctx context.Context, c *simCluster, recorded, from uint64, first int) {
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if leaving(ctx, c.group(from), first) {
			break
		}
		if v, err := ask.One(ctx, c.managers()[0], "", "FLINT.MAP"); err == nil && len(v.Elems) == 3 {
			if m, err := shardmap.Decode(v.Elems[0].Str); err == nil && m.Epoch > recorded && len(m.Moves) == 0 {
				t.Logf("the move was done before its source's record could be seen: no manager crashed")
				return
			}
		}
	}
	meta := c.group(0)
	lead := meta.leader()
	if lead == nil {
		t.Logf("no manager leads: none crashed")
		return
	}
	meta.stop(lead, true)
	if err := meta.restart(lead); err != nil {
		t.Fatal(err)
	}
	t.Logf("crashed and restarted manager %d, which was taking the move's steps", lead.id)
}

// leaving reports whether a member of g answers FLINT.SLOTS STATUS with a
// record of slot s that is Leaving or Gone.
func leaving(ctx context.Context, g *simGroup, s int) bool {
	for _, addr := range g.addrs() {
		v, err := ask.One(ctx, addr, "", "FLINT.SLOTS", "STATUS")
		if err != nil {
			continue
		}
		for _, rec := range v.Elems {
			if len(rec.Elems) == 5 && int(rec.Elems[0].Int) <= s && s <= int(rec.Elems[1].Int) &&
				(string(rec.Elems[2].Str) == "leaving" || string(rec.Elems[2].Str) == "gone") {
				return true
			}
		}
	}
	return false
}

// change runs an operator's change, again after a failure, up to three
// times, each given a minute.
func change(t *testing.T, ctx context.Context, what string, do func(context.Context) error) {
	var err error
	for try := range 3 {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		start := time.Now()
		err = do(cctx)
		cancel()
		if err == nil {
			t.Logf("%s: done in %v", what, time.Since(start).Round(time.Millisecond))
			return
		}
		t.Logf("%s, try %d: %v", what, try+1, err)
	}
	t.Fatalf("%s: %v", what, err)
}

// finalMap returns the managers' map once it is of an epoch after since
// and lists no move under way.
func finalMap(t *testing.T, ctx context.Context, ctl *clusterctl.Group, since uint64) *shardmap.Map {
	var err error
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var sh clusterctl.Shards
		if sh, err = ctl.ShardStatus(ctx); err == nil && sh.Map.Epoch > since && len(sh.Map.Moves) == 0 {
			return sh.Map
		}
	}
	t.Fatalf("no map without moves after 60 s: %v", err)
	return nil
}

// heal ends every fault: every network heals and stops drawing faults,
// and every member that is down starts again.
func (c *simCluster) heal() error {
	for _, g := range c.all() {
		g.net.SetFaults(transporttest.Faults{})
		if err := g.heal(); err != nil {
			return err
		}
	}
	return nil
}

// heal heals g's network and starts its members that are down.
func (g *simGroup) heal() error {
	g.net.Heal()
	for _, mb := range g.members {
		if err := g.restart(mb); err != nil {
			return err
		}
	}
	return nil
}

// nemesis strikes a group at a time: it isolates a member, blocks its
// messages to the others (mute) or theirs to it (deaf), or crashes it, a
// leader half the time, and heals the group at its next turn.
type nemesis struct {
	c     *simCluster
	rng   *rand.Rand
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once         // closes stop
	hurt  map[uint64]string // what each group suffers now
	dealt map[string]int    // the faults dealt, by kind
}

func startNemesis(c *simCluster, rng *rand.Rand) *nemesis {
	n := &nemesis{c: c, rng: rng, stop: make(chan struct{}), done: make(chan struct{}), hurt: map[uint64]string{}, dealt: map[string]int{}}
	go n.run()
	return n
}

// run strikes until stopped, or for simMaxFaults, and then heals what it
// hurt, so that the operator's changes end on a machine too loaded for
// them to end under faults.
func (n *nemesis) run() {
	defer close(n.done)
	for end := time.Now().Add(simMaxFaults); time.Now().Before(end); {
		select {
		case <-n.stop:
			return
		case <-time.After(time.Duration(100+n.rng.IntN(200)) * time.Millisecond):
		}
		gs := n.c.all()
		if err := n.strike(gs[n.rng.IntN(len(gs))]); err != nil {
			n.c.t.Error(err)
			return
		}
	}
	for id := range n.hurt {
		if err := n.c.group(id).heal(); err != nil {
			n.c.t.Error(err)
		}
	}
}

// strike heals g if it is hurt, else hurts it half the time: so about a
// third of the groups suffer at any moment.
func (n *nemesis) strike(g *simGroup) error {
	if n.hurt[g.id] != "" {
		delete(n.hurt, g.id)
		return g.heal()
	}
	if n.rng.IntN(2) == 0 {
		return nil
	}
	mb, lead := g.members[n.rng.IntN(len(g.members))], false
	if n.rng.IntN(2) == 0 {
		if l := g.leader(); l != nil {
			mb, lead = l, true
		}
	}
	defer func() { n.dealt[n.hurt[g.id]]++ }()
	switch n.rng.IntN(4) {
	case 0:
		g.net.Isolate(mb.id)
		n.hurt[g.id] = "isolated"
	case 1:
		for _, o := range g.members {
			if o != mb {
				g.net.Block(mb.id, o.id)
			}
		}
		n.hurt[g.id] = "mute"
	case 2:
		// A leader that is deaf replicates its entries but learns of no
		// commit: it steps down, and answers its writes UNKNOWN, while
		// the next leader commits them. Clients resend them in their
		// sessions, which must not apply them twice.
		for _, o := range g.members {
			if o != mb {
				g.net.Block(o.id, mb.id)
			}
		}
		n.hurt[g.id] = "deaf"
	case 3:
		g.stop(mb, true)
		n.hurt[g.id] = "crashed"
	}
	if lead {
		n.hurt[g.id] += " leader"
	}
	return nil
}

// finish stops the nemesis and returns the faults it dealt, by kind.
func (n *nemesis) finish() map[string]int {
	n.once.Do(func() { close(n.stop) })
	<-n.done
	return n.dealt
}

// agree waits until every member of g holds the same keys, values,
// sessions and slot-move records, each read after a read barrier, and
// returns the keys and values.
func (g *simGroup) agree(t *testing.T, ctx context.Context) map[string][]byte {
	var diff string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var first *memberState
		diff = ""
		for _, mb := range g.members {
			st, err := g.state(ctx, mb)
			if err != nil {
				diff = err.Error()
				break
			}
			if first == nil {
				first = st
			} else if d := first.diff(st); d != "" {
				diff = fmt.Sprintf("member %d and member %d differ: %s", g.members[0].id, mb.id, d)
				break
			}
		}
		if diff == "" {
			return first.keys
		}
	}
	t.Fatalf("group %d: its members do not agree after 20 s: %s", g.id, diff)
	return nil
}

// memberState is what a member's store holds.
type memberState struct {
	keys      map[string][]byte
	sessions  []byte
	slotMoves string
}

// state reads member mb's store after a read barrier.
func (g *simGroup) state(ctx context.Context, mb *simMember) (*memberState, error) {
	g.mu.Lock()
	rep := mb.rep
	g.mu.Unlock()
	if rep == nil {
		return nil, fmt.Errorf("member %d is down", mb.id)
	}
	bctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := rep.ReadBarrier(bctx); err != nil {
		return nil, fmt.Errorf("member %d: read barrier: %w", mb.id, err)
	}
	s := rep.Store()
	st := &memberState{keys: map[string][]byte{}, sessions: s.Sessions(), slotMoves: fmt.Sprint(s.SlotMoves())}
	s.Snapshot().Ascend(func(k string, v []byte) bool {
		st.keys[k] = bytes.Clone(v)
		return true
	})
	return st, nil
}

// diff says how o differs from st, or "".
func (st *memberState) diff(o *memberState) string {
	switch {
	case !maps.EqualFunc(st.keys, o.keys, bytes.Equal):
		return fmt.Sprintf("%d keys and %d keys, or other values", len(st.keys), len(o.keys))
	case !bytes.Equal(st.sessions, o.sessions):
		return "their sessions"
	case st.slotMoves != o.slotMoves:
		return fmt.Sprintf("slot moves %s and %s", st.slotMoves, o.slotMoves)
	}
	return ""
}

// readBack checks that the cluster's client reads each key as its group
// holds it.
func readBack(t *testing.T, ctx context.Context, c *simCluster, held map[string][]byte) {
	cl, err := client.New(c.managers()[0], client.WithSeeds(c.managers()[1:]...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, k := range slices.Sorted(maps.Keys(held)) {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		v, err := cl.Get(rctx, k)
		cancel()
		if err != nil || !bytes.Equal(v, held[k]) {
			t.Errorf("GET %s through the client = %q (%v), but its group holds %q", k, v, err, held[k])
		}
	}
}

// The writers' model: each key is one writer's, which sends one command
// at a time.

// keyModel is what was written to one key.
type keyModel struct {
	kind      string // "incr", "set" or "append"
	attempted []string
	acked     []bool // of each attempted write
}

// lastAcked returns the index of the last acknowledged write, or -1.
func (m *keyModel) lastAcked() int {
	for i := len(m.acked) - 1; i >= 0; i-- {
		if m.acked[i] {
			return i
		}
	}
	return -1
}

func (m *keyModel) count() (acked, attempted int) {
	for _, a := range m.acked {
		if a {
			acked++
		}
	}
	return acked, len(m.attempted)
}

type simWriters struct {
	t      *testing.T
	stop   chan struct{}
	once   sync.Once // closes stop
	wg     sync.WaitGroup
	mu     sync.Mutex
	models map[string]*keyModel
	errs   map[string]int // unacknowledged writes, by error
	acks   int
}

// simKeysPerWriter is how many keys of each kind one writer writes.
const simKeysPerWriter = 24

// startSimWriters starts n writers, each with its own client (in
// sessions) and keys.
func startSimWriters(t *testing.T, ctx context.Context, c *simCluster, seed uint64, n int) *simWriters {
	w := &simWriters{t: t, stop: make(chan struct{}), models: map[string]*keyModel{}, errs: map[string]int{}}
	for i := range n {
		cl, err := client.New(c.managers()[0], client.WithSeeds(c.managers()[1:]...), client.WithSessions())
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, kind := range []string{"incr", "set", "append"} {
			for k := range simKeysPerWriter {
				key := fmt.Sprintf("%s-w%d-%d", kind, i, k)
				keys = append(keys, key)
				w.mu.Lock() // the writers started already read models
				w.models[key] = &keyModel{kind: kind}
				w.mu.Unlock()
			}
		}
		rng := rand.New(rand.NewPCG(seed, uint64(100+i)))
		w.wg.Go(func() {
			defer cl.Close()
			for range 20_000 {
				select {
				case <-w.stop:
					return
				default:
				}
				w.write(ctx, cl, keys[rng.IntN(len(keys))])
			}
		})
	}
	return w
}

// write sends one write to key and records its outcome.
func (w *simWriters) write(ctx context.Context, cl *client.Client, key string) {
	w.mu.Lock()
	m := w.models[key]
	n := len(m.attempted)
	val := fmt.Sprintf("%s.%d;", key, n)
	m.attempted, m.acked = append(m.attempted, val), append(m.acked, false)
	low, _ := m.count()
	w.mu.Unlock()
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var err error
	switch m.kind {
	case "incr":
		var got int64
		if got, err = cl.Incr(wctx, key); err == nil && (got < int64(low)+1 || got > int64(n)+1) {
			w.t.Errorf("INCR %s = %d, with %d acknowledged before and %d sent", key, got, low, n+1)
		}
	case "set":
		err = cl.Set(wctx, key, []byte(val))
	case "append":
		_, err = cl.Do(wctx, "APPEND", key, val)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil {
		m.acked[n] = true
		w.acks++
		return
	}
	var re *client.ReplyError
	switch {
	case errors.Is(err, client.ErrUnknownOutcome):
		w.errs["outcome unknown"]++
	case errors.Is(err, context.DeadlineExceeded):
		w.errs["deadline"]++
	case errors.As(err, &re):
		w.errs[re.Code()]++
		if slices.Contains([]string{"ERR", "WRONGTYPE", "CROSSSLOT"}, re.Code()) {
			w.t.Errorf("%s %s: %v", m.kind, key, err)
		}
	default:
		w.errs[err.Error()]++
	}
}

// finish stops the writers and returns their models.
func (w *simWriters) finish() map[string]*keyModel {
	w.once.Do(func() {
		close(w.stop)
		w.wg.Wait()
		w.t.Logf("%d writes acknowledged; not acknowledged: %v", w.acks, w.errs)
	})
	return w.models
}

// checkModels checks each key's value, as the groups hold it, against
// what was written to it.
func checkModels(t *testing.T, models map[string]*keyModel, held map[string][]byte) {
	for k := range held {
		if models[k] == nil {
			t.Errorf("key %q, never written, exists", k)
		}
	}
	for k, m := range models {
		v, ok := held[k]
		if !ok {
			if last := m.lastAcked(); last >= 0 {
				t.Errorf("%s is missing: its write %d was acknowledged", k, last)
			}
			continue
		}
		if err := m.check(v); err != nil {
			t.Errorf("%s = %q: %v", k, v, err)
		}
	}
}

// check checks v, a value the key holds, against the model.
func (m *keyModel) check(v []byte) error {
	acked, attempted := m.count()
	switch m.kind {
	case "incr":
		n, err := strconv.Atoi(string(v))
		if err != nil || n < acked || n > attempted {
			return fmt.Errorf("%d INCRs were acknowledged and %d attempted", acked, attempted)
		}
	case "set":
		i := slices.Index(m.attempted, string(v))
		if i < 0 || i < m.lastAcked() {
			return fmt.Errorf("not a value written at or after the last acknowledged, write %d", m.lastAcked())
		}
	case "append":
		return m.checkAppends(string(v))
	}
	return nil
}

// checkAppends checks that v is tokens attempted, in order, each at most
// once, and holds every acknowledged one.
func (m *keyModel) checkAppends(v string) error {
	next := 0 // the first attempted token that may come next
	for tok := range strings.SplitAfterSeq(v, ";") {
		if tok == "" {
			continue
		}
		i := slices.Index(m.attempted[next:], tok)
		if i < 0 {
			return fmt.Errorf("token %q was not attempted, or comes twice or out of order", tok)
		}
		for j := next; j < next+i; j++ {
			if m.acked[j] {
				return fmt.Errorf("acknowledged token %q is missing", m.attempted[j])
			}
		}
		next += i + 1
	}
	for j := next; j < len(m.attempted); j++ {
		if m.acked[j] {
			return fmt.Errorf("acknowledged token %q is missing", m.attempted[j])
		}
	}
	return nil
}
