package ask

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flintkv/flint/client"
	"github.com/flintkv/flint/internal/resptest"
	"github.com/flintkv/flint/internal/shardmap"
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

// TestPoolMap: once the pool has a map it sends its epoch with FLINT.MAP,
// and keeps its map when the node sends a null in its place.
func TestPoolMap(t *testing.T) {
	m, err := shardmap.Even([][]shardmap.Member{{{ID: 1, Addr: "127.0.0.1:7001"}}})
	if err != nil {
		t.Fatal(err)
	}
	var asked []string
	srv := resptest.Start(t, func(args []string) string {
		asked = append(asked, strings.Join(args, " "))
		enc := resptest.Bulk(string(m.Encode()))
		if len(args) == 2 {
			enc = resptest.Null
		}
		return resptest.Array(enc, resptest.Array(resptest.Int(1), resptest.Int(1)), resptest.Array())
	})
	p := NewPool("")
	defer p.Close()
	var got []*shardmap.Map
	for range 2 {
		gm, leaders, _, err := p.Map(context.Background(), srv.Addr)
		if err != nil || leaders[1] != 1 {
			t.Fatalf("FLINT.MAP: %v, leaders %v", err, leaders)
		}
		got = append(got, gm)
	}
	want := []string{"FLINT.MAP", fmt.Sprint("FLINT.MAP ", m.Epoch)}
	if !slices.Equal(asked, want) || got[0] != got[1] || got[0].Epoch != m.Epoch {
		t.Errorf("asked %q, got maps %p %p; want %q, the same map twice", asked, got[0], got[1], want)
	}
}
