package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flintkv/flint/internal/replica"
	"github.com/flintkv/flint/internal/server"
	"github.com/flintkv/flint/internal/server/servertest"
	"github.com/flintkv/flint/internal/vfs"
)

// TestPipelinesThroughRaft serves a replica and sends pipelines that mix
// reads and writes: each read sees exactly the writes before it, though the
// reads run on the apply thread, between the writes of one proposal.
func TestPipelinesThroughRaft(t *testing.T) {
	r, err := replica.Open(replica.Options{FS: vfs.NewMem(), Dir: "data", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	srv := servertest.StartBackend(t, server.Config{}, r)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
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
