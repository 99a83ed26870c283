package replica

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flintkv/flint/internal/store"
	"github.com/flintkv/flint/internal/vfs"
)

// TestApplyStoppedReleasesBatch checks that once Apply returns ErrStopped,
// the replica no longer reads the caller's batch, which the server reuses
// for its next one: with the race detector on, a read of it by the raft
// loop after Close is a reported race. Before the fix, such a read could
// also write to the log a batch that no client sent.
func TestApplyStoppedReleasesBatch(t *testing.T) {
	for range 100 {
		r := open(t, vfs.NewMem(), Options{})
		var wg sync.WaitGroup
		for range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := batchOf("k", "a value of some length, so that copying it takes a while")
				for r.Apply(context.Background(), buf, nil) == nil {
				}
				for i := range buf { // the next batch is built in the same memory
					buf[i] = 0xff
				}
			}()
		}
		r.Close()
		wg.Wait()
	}
}

// TestApplyStoppedAfterCallbacks checks that Apply does not return while
// its done callback may still run, even when the replica fails in the
// middle of a batch: the server takes its reply buffer back as soon as
// Apply returns.
func TestApplyStoppedAfterCallbacks(t *testing.T) {
	r := open(t, vfs.NewMem(), Options{})
	defer r.Close()
	var returned atomic.Bool
	entered := make(chan struct{})
	calls := 0 // the callback's and then the caller's, like a reply buffer
	done := func(i int, _ store.Result) {
		if i == 0 {
			close(entered)
			time.Sleep(100 * time.Millisecond) // a slow callback
		}
		if returned.Load() {
			t.Errorf("done(%d) ran after Apply returned", i)
		}
		calls++
	}
	go func() { <-entered; r.fail(errors.New("injected failure")) }()
	err := r.Apply(context.Background(), batchOf("a", "1", "b", "2"), done)
	returned.Store(true)
	calls++
	if err != nil && !errors.Is(err, ErrStopped) {
		t.Fatalf("Apply = %v, want nil or ErrStopped", err)
	}
}

// TestApplyTooLarge checks that a batch too large for a log record is
// refused, and the replica goes on.
func TestApplyTooLarge(t *testing.T) {
	r := open(t, vfs.NewMem(), Options{})
	defer r.Close()
	big := make([]byte, maxBatchBytes+1) // never touched: the length is refused first
	if err := r.Apply(context.Background(), big, nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Apply of %d bytes = %v, want ErrTooLarge", len(big), err)
	}
	if err := r.Apply(context.Background(), batchOf("k", "v"), nil); err != nil {
		t.Fatalf("Apply after a refused batch: %v", err)
	}
}

// TestNoSyncSnapshotsDurable: with NoSync, snapshots are still fsynced.
// Each snapshot lets older ones go, so a power loss after two of them
// would otherwise leave no snapshot to start from: NoSync may lose recent
// writes, never the whole store.
func TestNoSyncSnapshotsDurable(t *testing.T) {
	m := vfs.NewMem()
	r := open(t, m, Options{NoSync: true})
	for i, v := range []string{"1", "2", "3"} {
		if err := r.Apply(context.Background(), batchOf("k", v), nil); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			if err := r.Snapshot(); err != nil {
				t.Fatal(err)
			}
		}
	}
	m.Crash()
	r.Close()
	r2, err := Open(Options{FS: m, Dir: "data", NoSync: true, Logger: quiet()})
	if err != nil {
		t.Fatalf("restart after a power loss: %v", err)
	}
	defer r2.Close()
	if v, ok := r2.Store().Get([]byte("k")); !ok || string(v) != "3" {
		t.Fatalf("k = %q, %v after restart; want the last snapshot's 3", v, ok)
	}
}
