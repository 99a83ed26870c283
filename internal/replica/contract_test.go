package replica

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flintkv/flint/internal/store"
	"github.com/flintkv/flint/internal/vfs"
)

// These tests check Apply's contract with a context: a caller that gives
// up gets an error at once that says whether its write was proposed, and
// once Apply has returned, its batch is never proposed (if it was not)
// and its done callback is never called.

// heldReplica opens a replica whose log fsyncs can be held, and makes its
// first write, so that it leads and its term is written.
func heldReplica(t *testing.T) (*Replica, *holdSyncFS) {
	fs := &holdSyncFS{}
	r := open(t, wrapFS{vfs.NewMem(), ".wal", func(f vfs.File) vfs.File { return &holdSyncFile{File: f, fs: fs} }}, Options{})
	set(t, r, "k", "0")
	return r, fs
}

// waitTaken waits until the raft loop has taken every proposal sent to it.
func waitTaken(t *testing.T, r *Replica) {
	for deadline := time.Now().Add(10 * time.Second); len(r.propc) > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the raft loop took no proposal for 10 s")
		}
	}
}

// TestApplyGivenUpBeforeProposed cancels a write that the raft loop holds
// while the log writes the one before: it is never proposed.
func TestApplyGivenUpBeforeProposed(t *testing.T) {
	r, fs := heldReplica(t)
	defer r.Close()
	fs.hold()
	defer fs.release()
	first := make(chan error, 1)
	go func() { first <- r.Apply(context.Background(), batchOf("first", "1"), nil) }()
	<-fs.held
	ctx, cancel := context.WithCancel(context.Background())
	second := make(chan error, 1)
	go func() { second <- r.Apply(ctx, batchOf("second", "2"), nil) }()
	waitTaken(t, r)
	time.Sleep(10 * time.Millisecond) // let the second Apply wait for its outcome
	cancel()
	if err := <-second; !errors.Is(err, context.Canceled) || !errors.Is(err, ErrNoLeader) || errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("Apply given up while held = %v, want ErrNoLeader and context.Canceled", err)
	}
	fs.release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	set(t, r, "third", "3") // every write before it is applied
	if _, ok := r.Store().Get([]byte("second")); ok {
		t.Fatal("a write given up before it was proposed took effect")
	}
}

// TestApplyGivenUpAfterProposed cancels a write whose entry the log is
// writing: its outcome is unknown (here it takes effect), and its done is
// not called once Apply has returned.
func TestApplyGivenUpAfterProposed(t *testing.T) {
	r, fs := heldReplica(t)
	defer r.Close()
	fs.hold()
	defer fs.release()
	ctx, cancel := context.WithCancel(context.Background())
	var returned, lateCalls atomic.Bool
	done := func(int, store.Result) {
		if returned.Load() {
			lateCalls.Store(true)
		}
	}
	res := make(chan error, 1)
	go func() { res <- r.Apply(ctx, batchOf("a", "1"), done) }()
	<-fs.held // its entry is being written
	cancel()
	err := <-res
	returned.Store(true)
	if !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Apply given up while logged = %v, want ErrOutcomeUnknown and context.Canceled", err)
	}
	fs.release()
	set(t, r, "b", "2") // applied after a
	if got := get(t, r, "a"); got != "1" {
		t.Fatalf("a = %q, want 1: the write was logged", got)
	}
	if lateCalls.Load() {
		t.Fatal("done was called after Apply returned")
	}
}

// TestApplyGivenUpWhileApplied races giving up with the apply thread many
// times: Apply returns nil, or the context's error with the class that
// says whether its write was proposed, and done is never called after it
// returned (the race detector checks the rest).
func TestApplyGivenUpWhileApplied(t *testing.T) {
	r := open(t, vfs.NewMem(), Options{})
	defer r.Close()
	for i := range 300 {
		ctx, cancel := context.WithCancel(context.Background())
		var returned, late atomic.Bool
		go func() { time.Sleep(time.Duration(i%7) * 50 * time.Microsecond); cancel() }()
		err := r.Apply(ctx, batchOf("k", "v"), func(int, store.Result) {
			if returned.Load() {
				late.Store(true)
			}
		})
		returned.Store(true)
		if err != nil && (!errors.Is(err, context.Canceled) || errors.Is(err, ErrNoLeader) == errors.Is(err, ErrOutcomeUnknown)) {
			t.Fatalf("round %d: %v, want nil, or context.Canceled with one of ErrNoLeader and ErrOutcomeUnknown", i, err)
		}
		if late.Load() {
			t.Fatalf("round %d: done called after Apply returned", i)
		}
		cancel()
	}
}

// TestReplicasInOneProcess opens several replicas at once in one process,
// as a node hosting several groups (or a cluster test) does: none sets
// process-wide state that another relies on, and each serves its own data.
func TestReplicasInOneProcess(t *testing.T) {
	const n = 4
	rs := make([]*Replica, n)
	errs := make(chan error, n)
	for i := range n {
		go func() {
			var err error
			rs[i], err = Open(Options{FS: vfs.NewMem(), Dir: fmt.Sprint("data", i), Logger: quiet()})
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range rs {
		defer r.Close()
		set(t, r, "who", fmt.Sprint(i))
	}
	for i, r := range rs {
		if got := get(t, r, "who"); got != fmt.Sprint(i) {
			t.Fatalf("replica %d holds who=%s", i, got)
		}
	}
}
