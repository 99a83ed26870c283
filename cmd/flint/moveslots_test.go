package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flintkv/flint/internal/shardmap"
	"github.com/flintkv/flint/internal/slot"
)

// incrLoad is go-redis ClusterClients, one per counter {w<i>}n, each
// INCRing its counter and reading it back, one command at a time, while a
// test changes the cluster. Every read must see at least the INCRs
// acknowledged before it began, and at most those sent; a refused INCR
// (TRYAGAIN past the client's retries) is not applied.
type incrLoad struct {
	t        *testing.T
	stop     chan struct{}
	wg       sync.WaitGroup
	errs     chan error
	counters []*counter
}

type counter struct {
	sync.Mutex
	acked, sent int
}

// startIncrLoad starts n clients of the cluster whose manager is at addr.
func startIncrLoad(t *testing.T, ctx context.Context, addr string, n int) *incrLoad {
	l := &incrLoad{t: t, stop: make(chan struct{}), errs: make(chan error, n)}
	for w := range n {
		c := &counter{}
		l.counters = append(l.counters, c)
		key := fmt.Sprintf("{w%d}n", w)
		l.wg.Go(func() {
			cc := clusterClient([]string{addr})
			defer cc.Close()
			for i := 0; i < 100_000; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				if err := l.step(ctx, cc, c, key); err != nil {
					l.errs <- err
					return
				}
			}
		})
	}
	return l
}

// step INCRs key and reads it back.
func (l *incrLoad) step(ctx context.Context, cc *redis.ClusterClient, c *counter, key string) error {
	c.Lock()
	c.sent++
	low := c.acked
	c.Unlock()
	_, err := cc.Incr(ctx, key).Result()
	switch {
	case err == nil:
		c.Lock()
		c.acked++
		c.Unlock()
	case strings.HasPrefix(err.Error(), "TRYAGAIN"):
		c.Lock()
		c.sent-- // refused: not applied
		c.Unlock()
	default:
		return fmt.Errorf("INCR %s: %v", key, err)
	}
	v, err := cc.Get(ctx, key).Result()
	if err != nil && !strings.HasPrefix(err.Error(), "TRYAGAIN") {
		return fmt.Errorf("GET %s: %v", key, err)
	}
	c.Lock()
	high := c.sent
	c.Unlock()
	if n, _ := strconv.Atoi(v); err == nil && (n < low+1 || n > high) {
		return fmt.Errorf("GET %s = %s, want %d to %d", key, v, low+1, high)
	}
	return nil
}

// finish stops the clients and checks that each counter holds exactly
// its acknowledged INCRs, and that each had some.
func (l *incrLoad) finish(ctx context.Context, addr string) {
	t := l.t
	close(l.stop)
	l.wg.Wait()
	close(l.errs)
	for err := range l.errs {
		t.Error(err)
	}
	cc := clusterClient([]string{addr})
	defer cc.Close()
	for w, c := range l.counters {
		key := fmt.Sprintf("{w%d}n", w)
		v, err := cc.Get(ctx, key).Result()
		if n, _ := strconv.Atoi(v); err != nil || n != c.acked {
			t.Errorf("%s = %q (%v) after %d acknowledged INCRs", key, v, err, c.acked)
		}
		t.Logf("%s: %d INCRs acknowledged", key, c.acked)
		if c.acked == 0 {
			t.Errorf("writer %d had no INCR acknowledged", w)
		}
	}
}

// clusterChange runs `flint cluster args...` and fails the test unless it
// exits 0 and prints want, stopping l's clients first, if any.
func clusterChange(t *testing.T, l *incrLoad, want string, args ...string) string {
	t.Helper()
	out, code := runFlint(t, flintBin, nil, append([]string{"cluster"}, args...)...)
	if code != 0 || !strings.Contains(out, want) {
		if l != nil {
			close(l.stop)
			l.wg.Wait()
		}
		t.Fatalf("flint cluster %s: exit %d, want %q:\n%s", strings.Join(args, " "), code, want, out)
	}
	t.Logf("flint cluster %s:\n%s", args[0], out)
	return out
}

// TestMoveSlotsOnline moves a range of slots from its group to another
// and back, with `flint cluster move-slots`, while go-redis ClusterClients
// INCR counters in those slots and others and read them back (incrLoad),
// across three groups in their own processes: every INCR acknowledged is
// applied once, none lost and none applied twice. The first move-slots is
// killed (SIGKILL) as soon as the map lists its move: the manager
// finishes the move with no one running the command again.
func TestMoveSlotsOnline(t *testing.T) {
	s := startSharded(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	moving := slot.Of([]byte("{w0}"))
	first, last := moving, min(moving+50, slot.Count-1)
	from := s.owner("{w0}") + 1 // groups count from 1
	to := from%3 + 1
	l := startIncrLoad(t, ctx, s.manager, 4)
	for _, target := range []int{to, from} {
		time.Sleep(300 * time.Millisecond) // let the clients get going
		args := []string{"move-slots", "--addr", s.manager, "--slots", fmt.Sprintf("%d-%d", first, last), "--to", strconv.Itoa(target), "--timeout", "1m"}
		if target == to {
			moveKilled(t, l, s.manager, args, first, last, target)
		} else {
			clusterChange(t, l, fmt.Sprintf("slots %d-%d belong to group %d", first, last, target), args...)
		}
		c := redis.NewClient(&redis.Options{Addr: s.servers[target-1]})
		awaitGet(t, c, "{w0}n") // the target serves the slots itself
		c.Close()
	}
	time.Sleep(300 * time.Millisecond)
	l.finish(ctx, s.manager)
}

// moveKilled runs `flint cluster args...`, a move-slots of slots first
// to last to group target, kills it with SIGKILL as soon as the manager's
// map lists a move, and waits until the manager has finished the move on
// its own: the map lists none, and gives the slots to group target.
func moveKilled(t *testing.T, l *incrLoad, manager string, args []string, first, last, target int) {
	t.Helper()
	cmd := exec.Command(flintBin, append([]string{"cluster"}, args...)...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: manager})
	defer c.Close()
	var listed uint64 // the epoch of the map that lists the move
	for deadline := time.Now().Add(30 * time.Second); listed == 0; time.Sleep(2 * time.Millisecond) {
		if m, err := shardmapOf(c.Do(context.Background(), "FLINT.MAP").Val()); err == nil && len(m.Moves) > 0 {
			listed = m.Epoch
			continue
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the map lists no move 30 s after move-slots started:\n%s", out.String())
		}
	}
	cmd.Process.Kill()
	if err := cmd.Wait(); err == nil {
		t.Logf("move-slots ended before it was killed:\n%s", out.String())
	}
	awaitMoved(t, l, c, listed, first, last, target)
}

// awaitMoved waits up to 30 s until the map of the manager that c reaches
// is of an epoch after since, lists no move, and gives the slots first to
// last to group target.
func awaitMoved(t *testing.T, l *incrLoad, c *redis.Client, since uint64, first, last, target int) {
	t.Helper()
	var m *shardmap.Map
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m, err = shardmapOf(c.Do(context.Background(), "FLINT.MAP").Val()); err != nil || m.Epoch <= since || len(m.Moves) > 0 {
			continue
		}
		for s := first; s <= last; s++ {
			if o := m.Owner(s); o == nil || o.ID != uint64(target) {
				t.Fatalf("slot %d belongs to %v once the map lists no move, want group %d", s, o, target)
			}
		}
		return
	}
	if l != nil {
		close(l.stop)
		l.wg.Wait()
	}
	t.Fatalf("the manager has not finished the move of slots %d-%d to group %d after 30 s: map %+v (%v)", first, last, target, m, err)
}

// TestAddGroupAndRebalance splits a cluster of two groups with a third,
// started empty (`flint cluster add-group`), then evens the slots out
// (`rebalance`), under the same clients as TestMoveSlotsOnline: the new
// group ends with its share, and every counter with its acknowledged
// INCRs.
func TestAddGroupAndRebalance(t *testing.T) {
	s := startSharded(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	addr := freeAddrs(t, 1)[0]
	s.start(s.add(addr, "server", "2", s.manager, port(t, addr), filepath.Join(t.TempDir(), "p2")))
	l := startIncrLoad(t, ctx, s.manager, 6)
	time.Sleep(300 * time.Millisecond)
	clusterChange(t, l, "group 3 was added", "add-group", "--addr", s.manager, "--group", "3", "--members", "1="+addr, "--timeout", "2m")
	out := clusterChange(t, l, "slots moved", "rebalance", "--addr", s.manager, "--timeout", "2m")
	time.Sleep(300 * time.Millisecond)
	l.finish(ctx, s.manager)
	// The split took the upper half of group 1 (the first of the largest);
	// the rebalance gave 5462, 5461 and 5461 slots from the top of group 2.
	for _, want := range []string{"1      0-4095,15018-16383 ", "2      8192-13652 ", "3      4096-8191,13653-15017 "} {
		if !strings.Contains(out, want) {
			t.Errorf("after the rebalance, no line %q in:\n%s", want, out)
		}
	}
}

// awaitGet waits up to 10 s until the member c reaches serves a GET of
// key itself.
func awaitGet(t *testing.T, c *redis.Client, key string) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err = c.Get(context.Background(), key).Err(); err == nil {
			return
		}
	}
	t.Fatalf("GET %s at %s: %v after 10 s", key, c.Options().Addr, err)
}

// TestMoveSlotsResumes leaves a move as a crash of the manager taking its
// steps would after the first ones (the source logged Leaving; the target
// holds part of the keys, one of them stale; the map lists the move), and
// checks that the manager finishes it: the keys all arrive, the map drops
// the move, and the target serves the slot. It then leaves the move back
// as a crash after the target opened the slot would, where redis-cli -c
// follows the source's ASK, and the manager finishes that one too. A third
// move, left after its first steps with its target down, holds up a
// move-slots of other slots, which is refused with the map unchanged, and
// is given up with move-slots --abort once the target is back.
func TestMoveSlotsResumes(t *testing.T) {
	s := startSharded(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cc := clusterClient([]string{s.manager})
	defer cc.Close()
	for i := range 20 {
		if err := cc.Set(ctx, fmt.Sprintf("{r}%d", i), strconv.Itoa(i), 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cc.Set(ctx, "{r}ttl", "x", time.Hour).Err(); err != nil { // its deadline moves with it
		t.Fatal(err)
	}
	sl := slot.Of([]byte("{r}"))
	from := s.owner("{r}") + 1
	to := from%3 + 1
	do := func(addr string, args ...any) any {
		t.Helper()
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		v, err := c.Do(ctx, args...).Result()
		if err != nil {
			t.Fatalf("%v at %s: %v", args, addr, err)
		}
		return v
	}
	// record makes the map list a move of the slot from group a to b, as
	// move-slots's first step does, and returns the map's epoch.
	record := func(a, b int) uint64 {
		t.Helper()
		m, err := shardmapOf(do(s.manager, "FLINT.MAP"))
		if err == nil {
			m, err = m.WithMoves([]shardmap.Move{{Slots: shardmap.Range{First: sl, Last: sl}, From: uint64(a), To: uint64(b)}}, nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		if v := do(s.manager, "FLINT.MAPSET", string(m.Encode())); v != int64(1) {
			t.Fatalf("FLINT.MAPSET = %v", v)
		}
		return m.Epoch
	}
	// step sends FLINT.SLOTS step <slot> <slot> <peer> more... to group g.
	step := func(g int, name string, peer int, more ...any) any {
		t.Helper()
		return do(s.servers[g-1], append([]any{"FLINT.SLOTS", name, strconv.Itoa(sl), strconv.Itoa(sl), strconv.Itoa(peer)}, more...)...)
	}
	// The groups' steps first, then the map: the manager takes the steps
	// of the moves the map lists.
	step(from, "LEAVE", to)
	step(to, "IMPORT", from, "{r}0", "stale", "0")
	epoch := record(from, to)
	mc := redis.NewClient(&redis.Options{Addr: s.manager})
	defer mc.Close()
	awaitMoved(t, nil, mc, epoch, sl, sl, to)
	for i := range 20 {
		key := fmt.Sprintf("{r}%d", i)
		if v, err := cc.Get(ctx, key).Result(); err != nil || v != strconv.Itoa(i) {
			t.Errorf("GET %s = %q (%v), want %d", key, v, err, i)
		}
	}
	c := redis.NewClient(&redis.Options{Addr: s.servers[to-1]})
	defer c.Close()
	awaitGet(t, c, "{r}0")
	if ttl, err := cc.TTL(ctx, "{r}ttl").Result(); err != nil || ttl <= 0 || ttl > time.Hour {
		t.Errorf("TTL {r}ttl after the move = %v (%v), want its hour, less the time since", ttl, err)
	}

	// Now back, left as a crash after the target opened the slot: the keys
	// copied, the source Gone. redis-cli -c follows the source's ASK to
	// the target, for a read and a write; the next move-slots finishes.
	step(to, "LEAVE", from)
	export := do(s.servers[to-1], "FLINT.SLOTS", "EXPORT", strconv.Itoa(sl), strconv.Itoa(sl), "", "100").([]any)
	step(from, "IMPORT", to, export[1].([]any)...)
	step(to, "GONE", from)
	step(from, "OPEN", to)
	cli := func(args ...string) string {
		out, err := exec.Command("redis-cli", append([]string{"-c", "-p", port(t, s.servers[to-1])}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	_, noCli := exec.LookPath("redis-cli")
	if noCli == nil {
		if got := cli("GET", "{r}3"); got != "3" {
			t.Errorf("redis-cli -c GET {r}3 at the source = %q, want 3", got)
		}
		if got := cli("SET", "{r}3", "x"); got != "OK" {
			t.Errorf("redis-cli -c SET {r}3 at the source = %q, want OK", got)
		}
	}
	awaitMoved(t, nil, mc, record(to, from), sl, sl, from)
	for i := range 20 {
		key, want := fmt.Sprintf("{r}%d", i), strconv.Itoa(i)
		if i == 3 && noCli == nil {
			want = "x"
		}
		if v, err := cc.Get(ctx, key).Result(); err != nil || v != want {
			t.Errorf("GET %s after the move back = %q (%v), want %s", key, v, err, want)
		}
	}

	// A third move, left after its first steps with its target down: a
	// move-slots of other slots is refused, and the map stays as it was;
	// move-slots --abort gives the move up once the target is back: the
	// source serves writes again, and the target keeps nothing of the slot.
	step(from, "LEAVE", to)
	step(to, "IMPORT", from, "{r}0", "0", "0")
	s.kill(to - 1)
	epoch = record(from, to)
	var before *shardmap.Map
	for deadline := time.Now().Add(10 * time.Second); before == nil || before.Epoch < epoch; time.Sleep(20 * time.Millisecond) {
		if before, _ = shardmapOf(do(s.manager, "FLINT.MAP")); time.Now().After(deadline) {
			t.Fatalf("the manager serves no map of epoch %d after 10 s: %+v", epoch, before)
		}
	}
	other := (sl + 1000) % slot.Count
	out, code := runFlint(t, flintBin, nil, "cluster", "move-slots", "--addr", s.manager, "--slots", strconv.Itoa(other), "--to", strconv.Itoa(to))
	if want := fmt.Sprintf("a move of slots %d-%d to group %d is in progress", sl, sl, to); code != 1 || !strings.Contains(out, want) {
		t.Errorf("a second move-slots: exit %d, want 1 and %q:\n%s", code, want, out)
	}
	time.Sleep(300 * time.Millisecond) // longer than the manager takes to learn a new map
	if after, err := shardmapOf(do(s.manager, "FLINT.MAP")); err != nil || string(after.Encode()) != string(before.Encode()) {
		t.Errorf("the refused move-slots changed the map:\n%s\nto\n%s (%v)", before.Encode(), after.Encode(), err)
	}
	abort := exec.Command(flintBin, "cluster", "move-slots", "--addr", s.manager, "--abort", "--timeout", "1m")
	var abortOut strings.Builder
	abort.Stdout, abort.Stderr = &abortOut, &abortOut
	if err := abort.Start(); err != nil {
		t.Fatal(err)
	}
	awaitShardStatus(t, s.manager, "being given up")
	s.start(to - 1)
	if err := abort.Wait(); err != nil || !strings.Contains(abortOut.String(), "1 moves given up") {
		t.Fatalf("move-slots --abort: %v, want \"1 moves given up\":\n%s", err, abortOut.String())
	}
	if err := cc.Set(ctx, "{r}0", "after", 0).Err(); err != nil {
		t.Errorf("SET {r}0 after the move was given up: %v", err)
	}
	if got := fmt.Sprint(do(s.servers[to-1], "FLINT.SLOTS", "STATUS")); strings.Contains(got, strconv.Itoa(sl)) {
		t.Errorf("the target's records after the move was given up: %s", got)
	}
	if n := do(s.servers[to-1], "CLUSTER", "COUNTKEYSINSLOT", strconv.Itoa(sl)); n != int64(0) {
		t.Errorf("the target holds %v keys of the slot after the move was given up", n)
	}
}

// awaitShardStatus waits up to 10 s until `flint cluster status` at the
// manager prints want.
func awaitShardStatus(t *testing.T, manager, want string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out, _ := runFlint(t, flintBin, nil, "cluster", "status", "--addr", manager)
		if strings.Contains(out, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("flint cluster status does not print %q after 10 s:\n%s", want, out)
		}
	}
}

// shardmapOf decodes FLINT.MAP's reply, as go-redis gives it.
func shardmapOf(v any) (*shardmap.Map, error) {
	a, ok := v.([]any)
	if !ok || len(a) != 3 {
		return nil, fmt.Errorf("FLINT.MAP replied %v", v)
	}
	enc, _ := a[0].(string)
	return shardmap.Decode([]byte(enc))
}
