package clusterctl

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flintkv/flint/internal/resptest"
	"github.com/flintkv/flint/internal/shardmap"
)

// fakeManager answers CLUSTER MYID as a manager does, and FLINT.MAP with
// m, or, if m is nil, as a manager that has not read the map yet.
func fakeManager(t *testing.T, m *shardmap.Map) *resptest.Server {
	return resptest.Start(t, func(args []string) string {
		switch {
		case len(args) == 2 && args[0] == "CLUSTER" && args[1] == "MYID":
			return resptest.Bulk("0000000000000000000000000000000000000001")
		case args[0] == "FLINT.MAP" && m != nil:
			return "*3\r\n" + resptest.Bulk(string(m.Encode())) + "*0\r\n*0\r\n"
		case args[0] == "FLINT.MAP":
			return resptest.Err("CLUSTERDOWN The cluster map is not known here yet")
		}
		return resptest.Err("ERR unknown command")
	})
}

// TestShardStatusPassesOverManagerWithoutMap: a manager that restarted
// and has not read the map yet does not stop ShardStatus from asking the
// next one (a slot move run meanwhile failed, told there was no map).
func TestShardStatusPassesOverManagerWithoutMap(t *testing.T) {
	m, err := shardmap.Even([][]shardmap.Member{{{ID: 1, Addr: "127.0.0.1:7101"}}, {{ID: 1, Addr: "127.0.0.1:7201"}}})
	if err != nil {
		t.Fatal(err)
	}
	blank, full := fakeManager(t, nil), fakeManager(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g, _ := Dial(Config{Addrs: []string{blank.Addr, full.Addr}})
	sh, err := g.ShardStatus(ctx)
	if err != nil || sh.Map.Epoch != m.Epoch || len(sh.Map.Groups) != 2 {
		t.Fatalf("ShardStatus = %+v, %v; want the second manager's map", sh, err)
	}
	g, _ = Dial(Config{Addrs: []string{blank.Addr}})
	if _, err := g.ShardStatus(ctx); !errors.Is(err, ErrNoMap) {
		t.Fatalf("ShardStatus of a manager alone without the map = %v, want ErrNoMap", err)
	}
}
