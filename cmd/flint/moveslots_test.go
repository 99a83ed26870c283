package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flintkv/flint/internal/slot"
)

// TestMoveSlotsOnline moves a range of slots from its group to another
// and back, with `flint cluster move-slots`, while go-redis ClusterClients
// INCR counters in those slots and others and read them back, across three
// groups in their own processes. Every INCR acknowledged is applied once:
// each counter ends at the number of its acknowledged INCRs, none lost and
// none applied twice (refused ones, TRYAGAIN past the client's retries, are
// not applied); every read sees at least the INCRs acknowledged before it
// began, and at most those sent.
func TestMoveSlotsOnline(t *testing.T) {
	s := startSharded(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const writers = 4
	moving := slot.Of([]byte("{w0}"))
	first, last := moving, min(moving+50, slot.Count-1)
	from := s.owner("{w0}") + 1 // groups count from 1
	to := from%3 + 1

	type counter struct {
		sync.Mutex
		acked, sent int
	}
	counters := make([]*counter, writers)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 2*writers)
	for w := range writers {
		counters[w] = &counter{}
		key := fmt.Sprintf("{w%d}n", w)
		wg.Go(func() { // writes, then reads back, one at a time
			cc := clusterClient([]string{s.manager})
			defer cc.Close()
			c := counters[w]
			for i := 0; i < 100_000; i++ {
				select {
				case <-stop:
					return
				default:
				}
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
					errs <- fmt.Errorf("INCR %s: %v", key, err)
					return
				}
				v, err := cc.Get(ctx, key).Result()
				if err != nil && !strings.HasPrefix(err.Error(), "TRYAGAIN") {
					errs <- fmt.Errorf("GET %s: %v", key, err)
					return
				}
				c.Lock()
				high := c.sent
				c.Unlock()
				if n, _ := strconv.Atoi(v); err == nil && (n < low+1 || n > high) {
					errs <- fmt.Errorf("GET %s = %s, want %d to %d", key, v, low+1, high)
					return
				}
			}
		})
	}
	for _, target := range []int{to, from} {
		time.Sleep(300 * time.Millisecond) // let the writers get going
		out, code := runFlint(t, flintBin, nil, "cluster", "move-slots", "--addr", s.manager,
			"--slots", fmt.Sprintf("%d-%d", first, last), "--to", strconv.Itoa(target), "--timeout", "1m")
		if code != 0 || !strings.Contains(out, fmt.Sprintf("slots %d-%d belong to group %d", first, last, target)) {
			close(stop)
			wg.Wait()
			t.Fatalf("move-slots to group %d: exit %d:\n%s", target, code, out)
		}
		t.Logf("move-slots to group %d:\n%s", target, out)
		// The target now serves the slots.
		c := redis.NewClient(&redis.Options{Addr: s.servers[target-1]})
		awaitGet(t, c, "{w0}n")
		c.Close()
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	cc := clusterClient([]string{s.manager})
	defer cc.Close()
	for w, c := range counters {
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
