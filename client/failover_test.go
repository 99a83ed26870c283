package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flintkv/flint/client"
	"github.com/flintkv/flint/internal/resptest"
)

// These tests drive the client against fake servers (package resptest)
// that answer as members of a replicated Flint will: MOVED from a
// follower, TRYAGAIN or CLUSTERDOWN with no leader, CLUSTER SLOTS naming
// the members.

// newClient returns a client of addr with opts and a one-second dial
// timeout, closed when the test ends, and fails the test if the client
// leaves goroutines behind.
func newClient(t *testing.T, addr string, opts ...client.Option) *client.Client {
	t.Helper()
	noLeaks(t)
	c, err := client.New(addr, append(opts, client.WithDialTimeout(time.Second))...)
	must(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// deadline returns a context that ends after d.
func deadline(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// counts counts commands by name; a Handler calls add, serialized by its
// server, and the test reads with get.
type counts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counts) add(args []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[strings.ToUpper(args[0])]++
}

func (c *counts) get(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

// follower answers every command but CLUSTER with a MOVED to the leader,
// and counts them.
func follower(n *counts, leader func() string) resptest.Handler {
	return func(args []string) string {
		if strings.EqualFold(args[0], "CLUSTER") {
			return resptest.Err("ERR unknown command 'CLUSTER'")
		}
		n.add(args)
		return resptest.Moved(866, leader())
	}
}

// counted wraps st's answers with a count of the commands.
func counted(n *counts, st resptest.Store) resptest.Handler {
	return func(args []string) string {
		n.add(args)
		return st.Handle(args)
	}
}

// TestMovedFollowed sends calls, many at once, to a follower: each is
// redirected once, the first ones to arrive, and the leader then takes
// every call directly.
func TestMovedFollowed(t *testing.T) {
	var fn, ln counts
	leader := resptest.Start(t, counted(&ln, resptest.Store{}))
	fol := resptest.Start(t, follower(&fn, func() string { return leader.Addr }))
	c := newClient(t, fol.Addr)
	ctx := ctxT(t)
	must(t, c.Set(ctx, "k", []byte("v")))
	if fn.get("SET") != 1 || ln.get("SET") != 1 {
		t.Fatalf("SET reached the follower %d times and the leader %d; want once each", fn.get("SET"), ln.get("SET"))
	}
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if v, err := c.Get(ctx, "k"); err != nil || string(v) != "v" {
				t.Errorf("Get after MOVED = %q, %v; want v", v, err)
			}
		})
	}
	wg.Wait()
	if n := fn.get("GET"); n != 0 {
		t.Fatalf("the follower got %d GETs after its MOVED; want 0 (the leader remembered)", n)
	}
}

// TestRefusalsRetried checks that each kind of refusal is retried until the
// server takes the command, and that a plain error reply is not.
func TestRefusalsRetried(t *testing.T) {
	for _, code := range []string{"TRYAGAIN", "CLUSTERDOWN", "READONLY", "LOADING"} {
		t.Run(code, func(t *testing.T) {
			var n counts
			st := resptest.Store{}
			srv := resptest.Start(t, func(args []string) string {
				n.add(args)
				if strings.EqualFold(args[0], "SET") && n.get("SET") <= 3 {
					return resptest.Err(code + " the cluster is electing a leader")
				}
				return st.Handle(args)
			})
			c := newClient(t, srv.Addr)
			must(t, c.Set(ctxT(t), "k", []byte("v")))
			if v, err := c.Get(ctxT(t), "k"); n.get("SET") != 4 || err != nil || string(v) != "v" {
				t.Fatalf("SET sent %d times, then GET = %q, %v; want 4 times (3 refused) and v", n.get("SET"), v, err)
			}
		})
	}
	t.Run("ERR", func(t *testing.T) {
		var n counts
		srv := resptest.Start(t, func(args []string) string {
			n.add(args)
			return resptest.Err("ERR not a refusal")
		})
		c := newClient(t, srv.Addr)
		_, err := c.Get(ctxT(t), "k")
		if re, ok := errors.AsType[*client.ReplyError](err); !ok || re.Code() != "ERR" || n.get("GET") != 1 {
			t.Fatalf("Get = %v after %d sends; want the ERR reply after one", err, n.get("GET"))
		}
	})
}

// TestDeadline checks that a call that cannot succeed ends at its deadline
// with the last error, and that its retries back off rather than spin.
func TestDeadline(t *testing.T) {
	t.Run("TRYAGAIN", func(t *testing.T) {
		srv := resptest.Start(t, func([]string) string { return resptest.Err("TRYAGAIN no leader") })
		refusedUntilDeadline(t, newClient(t, srv.Addr), "TRYAGAIN", func() {})
	})
	t.Run("MOVED back and forth", func(t *testing.T) {
		var aAddr, bAddr atomic.Pointer[string] // known once the servers run
		var an, bn counts
		a := resptest.Start(t, follower(&an, func() string { return *bAddr.Load() }))
		b := resptest.Start(t, follower(&bn, func() string { return *aAddr.Load() }))
		aAddr.Store(&a.Addr)
		bAddr.Store(&b.Addr)
		sent := 0
		refusedUntilDeadline(t, newClient(t, a.Addr), "MOVED", func() {
			// 10 ms doubling over 300 ms is a handful of backoffs.
			n := an.get("GET") + bn.get("GET")
			if n-sent > 50 {
				t.Fatalf("%d attempts in 300 ms between two members naming each other; want a few (backoff)", n-sent)
			}
			sent = n
		})
	})
	t.Run("down", func(t *testing.T) {
		srv := resptest.Start(t, resptest.Store{}.Handle)
		c := newClient(t, srv.Addr)
		srv.Stop()
		err := timedGet(t, c)
		if !errors.Is(err, client.ErrConnect) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, client.ErrUnknownOutcome) {
			t.Fatalf("Get = %v; want ErrConnect and DeadlineExceeded, not ErrUnknownOutcome", err)
		}
	})
}

// refusedUntilDeadline runs Gets that c's server refuses with code until
// their deadlines, calling check after each. Each ends with
// DeadlineExceeded and, as the package doc says, either the last refusal,
// if its deadline came while it waited out a backoff, or
// ErrUnknownOutcome, if while an attempt was in flight. That is rare on an
// idle machine but not on a loaded one, where a reply takes milliseconds:
// so it runs up to 10 Gets until one ends in a backoff, which must carry
// the refusal.
func refusedUntilDeadline(t *testing.T, c *client.Client, code string, check func()) {
	t.Helper()
	for range 10 {
		err := timedGet(t, c)
		check()
		re, refused := errors.AsType[*client.ReplyError](err)
		switch {
		case !errors.Is(err, context.DeadlineExceeded):
			t.Fatalf("Get = %v; want DeadlineExceeded", err)
		case refused && re.Code() == code:
			return
		case !errors.Is(err, client.ErrUnknownOutcome):
			t.Fatalf("Get = %v; want the last %s, or ErrUnknownOutcome", err, code)
		}
	}
	t.Fatalf("10 Gets ended with their last attempt in flight; want one that ended in a backoff, with the last %s", code)
}

// timedGet runs a Get with a 300 ms deadline, fails the test if it
// returns long after, and returns its error.
func timedGet(t *testing.T, c *client.Client) error {
	t.Helper()
	start := time.Now()
	_, err := c.Get(deadline(t, 300*time.Millisecond), "k")
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Get returned after %v, long after its deadline", d)
	}
	t.Logf("Get: %v", err)
	return err
}

// TestRestart kills a server while reads run and a write is in flight, and
// restarts it on the same port: the write reports its outcome unknown at
// once, and the reads, those in flight at the kill included, wait and go on
// once the server is back.
func TestRestart(t *testing.T) {
	st := resptest.Store{"k": "v"}
	writeArrived := make(chan struct{})
	srv := resptest.Start(t, func(args []string) string {
		if strings.EqualFold(args[0], "SET") && args[1] == "hang" {
			close(writeArrived)
			return resptest.Hang // and so do the calls behind it on its connection
		}
		return st.Handle(args)
	})
	c := newClient(t, srv.Addr)
	ctx := ctxT(t)
	var reads atomic.Int64
	stop := make(chan struct{})
	readErr := make(chan error, 1)
	go func() { readErr <- readUntil(ctx, c, stop, &reads) }()
	write := make(chan error, 1)
	go func() { write <- c.Set(ctx, "hang", []byte("x")) }()
	within(t, writeArrived, "the write to reach the server")

	srv.Stop()
	select {
	case err := <-write:
		if !errors.Is(err, client.ErrUnknownOutcome) || errors.Is(err, client.ErrConnect) {
			t.Fatalf("Set in flight at the kill = %v; want ErrUnknownOutcome alone", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Set in flight at the kill did not return")
	}
	time.Sleep(100 * time.Millisecond) // reads retry meanwhile
	srv.Restart(t)
	for n, giveUp := reads.Load()+10, time.After(10*time.Second); reads.Load() < n; {
		select {
		case err := <-readErr:
			t.Fatalf("reads stopped: %v", err)
		case <-giveUp:
			t.Fatal("no reads after the restart")
		case <-time.After(time.Millisecond):
		}
	}
	close(stop)
	must(t, <-readErr)
	must(t, c.Set(ctx, "k", []byte("after"))) // writes go on too
}

// readUntil reads k until stop is closed, counting the reads, and returns
// the first error or wrong value.
func readUntil(ctx context.Context, c *client.Client, stop <-chan struct{}, reads *atomic.Int64) error {
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		if v, err := c.Get(ctx, "k"); err != nil || string(v) != "v" {
			return fmt.Errorf("Get = %q, %w; want v", v, err)
		}
		reads.Add(1)
	}
}

// within waits for ch to be closed, failing the test after 10 seconds.
func within(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestUnknownWriteNotResent sends calls to a member that drops every
// command it gets, as a crash would, while another member is up: a write
// comes back with ErrUnknownOutcome, never having reached the other
// member, and a read is resent there, which then takes every call.
func TestUnknownWriteNotResent(t *testing.T) {
	var dn, ln counts
	dropper := resptest.Start(t, func(args []string) string {
		if strings.EqualFold(args[0], "CLUSTER") {
			return resptest.Err("ERR unknown command 'CLUSTER'")
		}
		dn.add(args)
		return resptest.Drop
	})
	live := resptest.Start(t, counted(&ln, resptest.Store{"k": "v"}))
	c := newClient(t, dropper.Addr, client.WithSeeds(live.Addr))
	ctx := ctxT(t)
	if err := c.Set(ctx, "k", []byte("w")); !errors.Is(err, client.ErrUnknownOutcome) || ln.get("SET") != 0 {
		t.Fatalf("Set dropped = %v, sent %d times elsewhere; want ErrUnknownOutcome, and not resent", err, ln.get("SET"))
	}
	for range 10 {
		if v, err := c.Get(ctx, "k"); err != nil || string(v) != "v" {
			t.Fatalf("Get = %q, %v; want v from the live member", v, err)
		}
	}
	if dn.get("GET") != 1 {
		t.Fatalf("the dropping member got %d GETs; want 1 (the live one answered and took over)", dn.get("GET"))
	}
}

// TestBatchMoved sends a pipeline to a member that runs some commands and
// turns the others away, with MOVED and TRYAGAIN: those are sent on to the
// leader, in order, and every reply comes back in its command's place.
func TestBatchMoved(t *testing.T) {
	var mu sync.Mutex
	var sent []string // the keys of the commands the leader got, in order
	leader := resptest.Start(t, func(args []string) string {
		mu.Lock()
		defer mu.Unlock()
		sent = append(sent, args[1])
		return resptest.Bulk("leader:" + args[1])
	})
	old := resptest.Start(t, func(args []string) string {
		switch args[1] {
		case "k1", "k4":
			return resptest.Moved(866, leader.Addr)
		case "k3":
			return resptest.Err("TRYAGAIN leadership moving")
		case "k5":
			return resptest.Err("ERR not a refusal")
		}
		return resptest.Bulk("old:" + args[1])
	})
	c := newClient(t, old.Addr)
	b := c.Batch()
	for i := range 7 {
		b.Get(fmt.Sprintf("k%d", i))
	}
	replies, err := b.Exec(ctxT(t))
	must(t, err)
	want := `["old:k0" "leader:k1" "old:k2" "leader:k3" "leader:k4" (error) ERR not a refusal "old:k6"]`
	if got := fmt.Sprint(replies); got != want {
		t.Fatalf("replies = %s, want %s", got, want)
	}
	if v, err := c.Get(ctxT(t), "k0"); err != nil || string(v) != "leader:k0" {
		t.Fatalf("Get after the batch = %q, %v; want it sent to the leader", v, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := fmt.Sprint(sent); got != "[k1 k3 k4 k0]" {
		t.Fatalf("the leader got %s, want [k1 k3 k4 k0]", got)
	}
}

// TestClusterSlots starts a client on a member whose CLUSTER SLOTS names
// the leader and another member: calls go straight to the leader, and when
// it dies, to the member learned from CLUSTER SLOTS alone, which won the
// election.
func TestClusterSlots(t *testing.T) {
	var sn, ln, on counts
	leader := resptest.Start(t, counted(&ln, resptest.Store{"k": "v"}))
	other := resptest.Start(t, counted(&on, resptest.Store{"k": "v2"}))
	_, otherPort, _ := net.SplitHostPort(other.Addr)
	seed := resptest.Start(t, func(args []string) string {
		if strings.EqualFold(args[0], "CLUSTER") && strings.EqualFold(args[1], "SLOTS") {
			return slots(leader.Addr, ":"+otherPort) // an empty host: the seed's
		}
		sn.add(args)
		return resptest.Err("TRYAGAIN no leader") // it has lost track
	})
	c := newClient(t, seed.Addr)
	ctx := ctxT(t)
	if v, err := c.Get(ctx, "k"); err != nil || string(v) != "v" || ln.get("GET") != 1 || sn.get("GET") != 0 {
		t.Fatalf("Get = %q, %v, with %d GETs at the seed; want v from the leader and none", v, err, sn.get("GET"))
	}
	leader.Stop()
	for range 3 {
		if v, err := c.Get(ctx, "k"); err != nil || string(v) != "v2" {
			t.Fatalf("Get after the leader died = %q, %v; want v2 from the other member", v, err)
		}
	}
	if on.get("GET") != 3 {
		t.Fatalf("the new leader got %d GETs, want 3", on.get("GET"))
	}
}

// slots encodes a CLUSTER SLOTS reply giving every slot to master, with
// replicas, all host:port.
func slots(master string, replicas ...string) string {
	nodes := append([]string{master}, replicas...)
	s := fmt.Sprintf("*1\r\n*%d\r\n:0\r\n:16383\r\n", 2+len(nodes))
	for _, n := range nodes {
		host, port, _ := net.SplitHostPort(n)
		s += fmt.Sprintf("*3\r\n%s:%s\r\n%s", resptest.Bulk(host), port, resptest.Bulk("id-"+n))
	}
	return s
}
