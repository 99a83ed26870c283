package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flintkv/flint/internal/replica"
	"github.com/flintkv/flint/internal/server"
	"github.com/flintkv/flint/internal/server/servertest"
	"github.com/flintkv/flint/internal/vfs"
)

// TestPipelinesThroughRaft serves a replica and sends pipelines that mix
// reads and writes: each read sees exactly the writes before it, though its
// keys are looked up on the apply thread, between the writes of one
// proposal, and its reply made once the proposal is applied.
func TestPipelinesThroughRaft(t *testing.T) {
	c := startReplica(t)
	ctx := context.Background()
	for round := range 20 {
		p := c.Pipeline()
		var gets []*redis.StringCmd
		for i := range 50 {
			p.Set(ctx, "k", fmt.Sprint(round, "-", i), 0)
			gets = append(gets, p.Get(ctx, "k"))
			p.Incr(ctx, "n")
		}
		mget := p.MGet(ctx, "k", "n")
		if _, err := p.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		for i, g := range gets {
			if want := fmt.Sprint(round, "-", i); g.Val() != want {
				t.Fatalf("round %d: GET after SET %d = %q, want %q", round, i, g.Val(), want)
			}
		}
		if v := mget.Val(); v[0] != fmt.Sprint(round, "-", 49) || v[1] != fmt.Sprint(50*(round+1)) {
			t.Fatalf("round %d: MGET = %v", round, v)
		}
	}
}

// TestSessions runs writes in a client session through a replica: a write
// sent again with the same sequence number is answered from the session,
// not applied again, also within one pipeline; an unknown session and a
// read in FLINT.SEQ are refused.
func TestSessions(t *testing.T) {
	c := startReplica(t)
	ctx := context.Background()
	id, err := c.Do(ctx, "flint.session").Int64()
	if err != nil || id <= 0 {
		t.Fatalf("FLINT.SESSION = %d (%v)", id, err)
	}
	seq := func(n int, args ...any) *redis.Cmd {
		return c.Do(ctx, append([]any{"flint.seq", id, n, 1}, args...)...)
	}
	for i, want := range []int64{1, 1, 1} { // the same write, sent three times
		if got, err := seq(1, "incr", "n").Int64(); err != nil || got != want {
			t.Fatalf("send %d of INCR seq 1 = %d (%v), want %d", i+1, got, err, want)
		}
	}
	if got, err := seq(2, "incr", "n").Int64(); err != nil || got != 2 {
		t.Fatalf("INCR seq 2 = %d (%v), want 2", got, err)
	}
	p := c.Pipeline() // a retry in the same pipeline as its first send
	p.Do(ctx, "flint.seq", id, 3, 1, "incr", "n")
	p.Do(ctx, "flint.seq", id, 3, 1, "incr", "n")
	p.Get(ctx, "n")
	cmds, err := p.Exec(ctx)
	if err != nil || cmds[0].(*redis.Cmd).Val() != int64(3) || cmds[1].(*redis.Cmd).Val() != int64(3) || cmds[2].(*redis.StringCmd).Val() != "3" {
		t.Fatalf("pipeline = %v (%v)", cmds, err)
	}
	if err := c.Do(ctx, "flint.seq", 12345, 1, 1, "set", "a", "b").Err(); err == nil || !strings.HasPrefix(err.Error(), "SESSIONEXPIRED") {
		t.Fatalf("a write in an unknown session = %v, want SESSIONEXPIRED", err)
	}
	if err := seq(4, "get", "n").Err(); err == nil || !strings.Contains(err.Error(), "runs a write command") {
		t.Fatalf("FLINT.SEQ GET = %v", err)
	}
	if err := seq(4, "set", "k").Err(); err == nil || !strings.Contains(err.Error(), "wrong number of arguments") {
		t.Fatalf("FLINT.SEQ SET with one argument = %v", err)
	}
	if v, err := c.Get(ctx, "n").Result(); err != nil || v != "3" {
		t.Fatalf("n = %q (%v), want 3: each INCR once", v, err)
	}
}

// TestSessionTx sends a transaction as one write of a session, MULTI, its
// commands, then FLINT.SEQ ... EXEC: sent again, it is answered with the
// reply of its one application, its read's included, and applies nothing.
// FLINT.SEQ EXEC runs at once inside MULTI, and an unknown session refuses
// the transaction.
func TestSessionTx(t *testing.T) {
	c := startReplica(t)
	ctx := context.Background()
	id, err := c.Do(ctx, "flint.session").Int64()
	if err != nil {
		t.Fatal(err)
	}
	c.Set(ctx, "k0", "c0", 0)
	tx := func(client, seq int64) string {
		p := c.Pipeline()
		p.Do(ctx, "multi")
		p.Do(ctx, "get", "k0")
		p.Do(ctx, "set", "k1", "v")
		p.Do(ctx, "set", "k0", seq) // a value of each send, if it applied
		exec := p.Do(ctx, "flint.seq", client, 1, 1, "exec")
		p.Exec(ctx)
		return fmt.Sprint(exec.Val(), exec.Err())
	}
	const want = "[c0 OK OK] <nil>"
	for send := range int64(3) {
		if got := tx(id, send); got != want {
			t.Fatalf("send %d: EXEC = %s, want %s", send+1, got, want)
		}
	}
	if v, err := c.Get(ctx, "k0").Result(); err != nil || v != "0" {
		t.Fatalf("k0 = %q (%v), want 0: the transaction applied once", v, err)
	}
	if got := tx(12345, 9); !strings.Contains(got, "SESSIONEXPIRED") {
		t.Fatalf("a transaction in an unknown session: EXEC = %s, want SESSIONEXPIRED", got)
	}
}

// startReplica serves a replica of one voter on an in-memory filesystem,
// and returns a client of it; both end with the test.
func startReplica(t *testing.T) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: startReplicaServer(t).Addr})
	t.Cleanup(func() { c.Close() })
	return c
}

// startReplicaServer serves a replica of one voter on an in-memory
// filesystem; both end with the test.
func startReplicaServer(t *testing.T) *servertest.Server {
	r, err := replica.Open(replica.Options{FS: vfs.NewMem(), Dir: "data", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return servertest.StartBackend(t, server.Config{}, r)
}
