package replica

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flintkv/flint/internal/seedtest"
	"github.com/flintkv/flint/internal/store"
)

// TestClusterExpiry gives keys deadlines through the leader of three
// members and checks that every member agrees on them, as they are made
// absolute with the leader's stamp, not each member's clock; that keys past
// their deadline are gone on every member as soon as an entry moves the
// clock past it, before anything removes them, and stay gone after the
// leader crashes; that the removal entries the new leader's expirer would
// propose (store.AppendDue) leave every member with the same keys; and
// that a member restarted from a snapshot holds the same deadlines.
func TestClusterExpiry(t *testing.T) {
	c := newCluster(t, 3, seedtest.Seed(t))
	const n = 50
	var b store.Batch
	for i := range n {
		b.Add(store.OpSetExpire, store.ExpireRelative, []byte(fmt.Sprint("short", i)), []byte("v"), store.DeadlineArg(100))
		b.Add(store.OpSetExpire, store.ExpireRelative, []byte(fmt.Sprint("long", i)), []byte("v"), store.DeadlineArg(3_600_000))
		b.Add(store.OpSet, 0, []byte(fmt.Sprint("plain", i)), []byte("v"))
	}
	c.apply(b.Bytes())
	lead := c.leader()
	at, has, _ := c.rs[lead].Store().TTL([]byte("short0"))
	if !has {
		t.Fatal("short0 has no deadline")
	}
	c.sameDeadlines(n)

	// Once the clock has passed the short deadlines, every member sees the
	// short keys gone, though they are still stored.
	for time.Now().UnixMilli() <= at {
		time.Sleep(10 * time.Millisecond) // bounded: at is 100 ms after the batch's stamp
	}
	c.set("tick", "1")
	c.wantKeys(n, false, 3*n+1)
	c.crash(lead)
	c.set("tick", "2")
	c.start(lead)
	c.wantKeys(n, false, 3*n+1)

	// The expirer's work at the new leader: remove them through the log.
	lead = c.leader()
	for round := 0; round < 10; round++ {
		b.Reset()
		if c.rs[lead].Store().AppendDue(&b, time.Now().UnixMilli(), 16) == 0 {
			break
		}
		c.apply(b.Bytes())
	}
	c.wantKeys(n, false, 2*n+1)

	// A snapshot carries the deadlines, and the clock.
	if err := c.rs[lead].Snapshot(); err != nil {
		t.Fatal(err)
	}
	c.crash(lead)
	c.start(lead)
	c.set("tick", "3")
	c.sameDeadlines(n)
	c.wantKeys(n, false, 2*n+1)
}

// apply applies batch at whichever member leads, trying again until it is
// acknowledged (a retried batch of these tests does the same twice).
func (c *cluster) apply(batch []byte) {
	c.t.Helper()
	for try := 0; try < 100; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.rs[c.leader()].Apply(ctx, batch, nil)
		cancel()
		if err == nil {
			return
		}
	}
	c.t.Fatal("a batch was not acknowledged in 100 tries")
}

// sameDeadlines checks that every member gives each long key the same
// deadline, once it has applied everything committed.
func (c *cluster) sameDeadlines(n int) {
	c.t.Helper()
	for i := range c.rs {
		if _, err := c.read(i, "tick"); err != nil {
			c.t.Fatalf("member %d: %v", i+1, err)
		}
	}
	for k := range n {
		key := []byte(fmt.Sprint("long", k))
		var want int64
		for i, r := range c.rs {
			at, has, found := r.Store().TTL(key)
			if !has || !found || (i > 0 && at != want) {
				c.t.Fatalf("member %d: %s deadline %d (%v %v), want %d as member 1's", i+1, key, at, has, found, want)
			}
			want = at
		}
	}
}

// wantKeys checks that every member has the long and plain keys, has the
// short ones only if short, and stores stored keys in all.
func (c *cluster) wantKeys(n int, short bool, stored int64) {
	c.t.Helper()
	for i, r := range c.rs {
		for k := range n {
			for _, key := range []string{fmt.Sprint("long", k), fmt.Sprint("plain", k), fmt.Sprint("short", k)} {
				v, err := c.read(i, key)
				if want := key[0] != 's' || short; err != nil || (v == "v") != want {
					c.t.Fatalf("member %d: %s = %q (%v), want present %v", i+1, key, v, err, want)
				}
			}
		}
		if got := r.Store().Len(); got != stored {
			c.t.Fatalf("member %d stores %d keys, want %d", i+1, got, stored)
		}
	}
}
