package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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
// exits 0 and prints want.
func clusterChange(t *testing.T, l *incrLoad, want string, args ...string) string {
	t.Helper()
	out, code := runFlint(t, flintBin, nil, append([]string{"cluster"}, args...)...)
	if code != 0 || !strings.Contains(out, want) {
		close(l.stop)
		l.wg.Wait()
		t.Fatalf("flint cluster %s: exit %d, want %q:\n%s", strings.Join(args, " "), code, want, out)
	}
	t.Logf("flint cluster %s:\n%s", args[0], out)
	return out
}

// TestMoveSlotsOnline moves a range of slots from its group to another
// and back, with `flint cluster move-slots`, while go-redis ClusterClients
// INCR counters in those slots and others and read them back (incrLoad),
// across three groups in their own processes: every INCR acknowledged is
// applied once, none lost and none applied twice.
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
		clusterChange(t, l, fmt.Sprintf("slots %d-%d belong to group %d", first, last, target),
			"move-slots", "--addr", s.manager, "--slots", fmt.Sprintf("%d-%d", first, last), "--to", strconv.Itoa(target), "--timeout", "1m")
		c := redis.NewClient(&redis.Options{Addr: s.servers[target-1]})
		awaitGet(t, c, "{w0}n") // the target serves the slots itself
		c.Close()
	}
	time.Sleep(300 * time.Millisecond)
	l.finish(ctx, s.manager)
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
