package replica

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flintkv/flint/internal/seedtest"
	"github.com/flintkv/flint/internal/store"
)

// txBatch is a batch of one transaction that sets each of keys to value,
// having watched the keys of watches at pos.
func txBatch(pos uint64, watches []string, value string, keys ...string) []byte {
	var tx store.Tx
	for _, w := range watches {
		tx.Watch([]byte(w), pos)
	}
	for _, k := range keys {
		tx.Add(store.OpSet, 0, []byte(k), []byte(value))
	}
	var b store.Batch
	b.Add(store.OpExec, 0, tx.Args()...)
	return b.Bytes()
}

// applyTx applies a transaction at the leader, trying again until it is
// acknowledged, and returns whether it applied (no watched key changed).
func (c *cluster) applyTx(batch []byte) bool {
	c.t.Helper()
	for try := 0; try < 100; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		var done bool
		err := c.rs[c.leader()].Apply(ctx, batch, func(_ int, res store.Result) { done = res.Done })
		cancel()
		if err == nil {
			return done
		}
	}
	c.t.Fatal("transaction not acknowledged in 100 tries")
	return false
}

// TestClusterTxWatch: a member that missed a write to a watched key, and
// learned it from the leader's snapshot, decides the transaction that
// watched the key as the others do, from the watch table the snapshot
// carries.
func TestClusterTxWatch(t *testing.T) {
	c := newClusterWith(t, 3, seedtest.Seed(t), Options{TickInterval: 5 * time.Millisecond, SnapshotEntries: 40})
	c.set("w", "0")
	lagging := (c.leader() + 1) % 3
	c.crash(lagging)
	pos := c.rs[c.leader()].Store().WatchPoint()
	c.set("w", "1") // after pos: a transaction that watched w at pos is refused
	for i := range 200 {
		c.set(fmt.Sprint("k", i), "x")
	}
	lead := c.rs[c.leader()]
	lead.snaps.wait()
	c.start(lagging)
	if v, err := c.read(lagging, "k199"); err != nil || v != "x" {
		t.Fatalf("lagging member: k199 = %q (%v)", v, err)
	}
	if c.rs[lagging].snaps.newest().index <= 2 {
		t.Fatal("the lagging member caught up without a snapshot: the test needs one")
	}
	if c.applyTx(txBatch(pos, []string{"w"}, "1", "refused")) {
		t.Fatal("a transaction that watched w before it was written applied")
	}
	if !c.applyTx(txBatch(c.rs[c.leader()].Store().WatchPoint(), []string{"w"}, "1", "applied")) {
		t.Fatal("a transaction that watched w after it was written was refused")
	}
	for i := range c.rs {
		for _, kv := range [][2]string{{"refused", "<nil>"}, {"applied", "1"}} {
			if v, err := c.read(i, kv[0]); err != nil || v != kv[1] {
				t.Fatalf("member %d: %s = %q (%v), want %s", i+1, kv[0], v, err, kv[1])
			}
		}
	}
}

// TestClusterTxAtomicFailover crashes the leader while writers hand it
// transactions of two keys each: whatever became of each (applied, lost
// or of unknown outcome), every member ends with both of its keys or
// neither.
func TestClusterTxAtomicFailover(t *testing.T) {
	c := newCluster(t, 3, seedtest.Seed(t))
	const writers, each = 4, 10
	r := c.rs[c.leader()]
	acked := make(chan bool, writers*each)
	for w := range writers {
		go func() {
			for i := range each {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				k := fmt.Sprint(w, "-", i)
				acked <- r.Apply(ctx, txBatch(0, nil, "1", "a"+k, "b"+k), nil) == nil
				cancel()
			}
		}()
	}
	for range 2 * writers { // some are through: crash the leader while others are in flight
		<-acked
	}
	c.crash(int(r.id - 1))
	for range writers*each - 2*writers {
		<-acked
	}
	c.set("after", "1") // the new leader has applied whatever it committed
	c.start(int(r.id - 1))
	applied := 0
	for i := range c.rs {
		for w := range writers {
			for j := range each {
				k := fmt.Sprint(w, "-", j)
				a, err1 := c.read(i, "a"+k)
				b, err2 := c.read(i, "b"+k)
				if err1 != nil || err2 != nil || a != b {
					t.Fatalf("member %d: transaction %s half applied: a = %q (%v), b = %q (%v)", i+1, k, a, err1, b, err2)
				}
				if a == "1" {
					applied++
				}
			}
		}
	}
	t.Logf("%d of %d transactions applied on each of 3 members", applied/3, writers*each)
}
