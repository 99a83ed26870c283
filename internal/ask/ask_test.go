package ask

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/flintkv/flint/client"
	"github.com/flintkv/flint/internal/resptest"
)

// TestPool: the pool asks every question to an address over one
// connection, AUTHed once; an error reply keeps it; a connection that
// breaks fails its question and is dialed again for the next.
func TestPool(t *testing.T) {
	var conns, auths, roles atomic.Int64
	srv := resptest.StartConns(t, func() resptest.Handler {
		conns.Add(1)
		return func(args []string) string {
			switch args[0] {
			case "AUTH":
				auths.Add(1)
				return "+OK\r\n"
			case "ROLE":
				if roles.Add(1) == 7 {
					return resptest.Drop
				}
				return resptest.Array(resptest.Bulk("master"))
			}
			return resptest.Err("ERR unknown command")
		}
	})
	p := NewPool("secret")
	defer p.Close()
	ctx := context.Background()
	for i := range 6 {
		if v, err := p.One(ctx, srv.Addr, "ROLE"); err != nil || string(v.Elems[0].Str) != "master" {
			t.Fatalf("question %d: %v, %v", i, v, err)
		}
	}
	if _, err := p.One(ctx, srv.Addr, "NOPE"); !errors.As(err, new(*client.ReplyError)) {
		t.Fatalf("an unknown command: %v, want its error reply", err)
	}
	if conns.Load() != 1 || auths.Load() != 1 {
		t.Fatalf("7 questions took %d connections and %d AUTHs, want 1 and 1", conns.Load(), auths.Load())
	}
	if _, err := p.One(ctx, srv.Addr, "ROLE"); err == nil {
		t.Fatal("a question whose connection broke did not fail")
	}
	if v, err := p.One(ctx, srv.Addr, "ROLE"); err != nil || string(v.Elems[0].Str) != "master" {
		t.Fatalf("the question after a broken connection: %v, %v", v, err)
	}
	if conns.Load() != 2 || auths.Load() != 2 {
		t.Fatalf("after a broken connection: %d connections, %d AUTHs, want 2 and 2", conns.Load(), auths.Load())
	}
}
