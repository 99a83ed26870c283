package clusterctl

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
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

// TestShardStatusWaitsForAnAnswer: while no manager answers (the only one
// restarting), ShardStatus fails at once, and shardStatusWait, which the
// commands that begin by reading the map use, asks again until one does.
func TestShardStatusWaitsForAnAnswer(t *testing.T) {
	m, err := shardmap.Even([][]shardmap.Member{{{ID: 1, Addr: "127.0.0.1:7101"}}})
	if err != nil {
		t.Fatal(err)
	}
	mgr := fakeManager(t, m)
	mgr.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g, _ := Dial(Config{Addrs: []string{mgr.Addr}})
	if _, err := g.ShardStatus(ctx); !errors.Is(err, errNoAnswer) {
		t.Fatalf("ShardStatus with the manager down = %v, want errNoAnswer", err)
	}
	restarted := make(chan struct{})
	go func() {
		defer close(restarted)
		time.Sleep(300 * time.Millisecond)
		mgr.Restart(t)
	}()
	sh, err := g.shardStatusWait(ctx)
	<-restarted
	if err != nil || sh.Map.Epoch != m.Epoch {
		t.Fatalf("shardStatusWait = %+v, %v; want the map once the manager is back", sh, err)
	}
	short, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	mgr.Stop()
	if _, err := g.shardStatusWait(short); !errors.Is(err, errNoAnswer) {
		t.Fatalf("shardStatusWait until its context ends = %v, want errNoAnswer", err)
	}
}

// TestStartGroupWaitsForNode: FLINT.GROUP START goes again while its node
// cannot be reached (restarting), and not after the node's refusal; a
// node that runs the group already has started it.
func TestStartGroupWaitsForNode(t *testing.T) {
	var reply atomic.Value
	reply.Store("+OK\r\n")
	node := resptest.Start(t, func([]string) string { return reply.Load().(string) })
	node.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g, _ := Dial(Config{Addrs: []string{node.Addr}})
	restarted := make(chan struct{})
	go func() {
		defer close(restarted)
		time.Sleep(300 * time.Millisecond)
		node.Restart(t)
	}()
	args := []string{"FLINT.GROUP", "START", "3", "1=127.0.0.1:1"}
	err := g.startGroup(ctx, node.Addr, args)
	<-restarted
	if err != nil {
		t.Fatalf("startGroup while the node restarts = %v, want it started once the node is back", err)
	}
	reply.Store(resptest.Err("ERR group 3 " + groupRuns))
	if err := g.startGroup(ctx, node.Addr, args); err != nil {
		t.Fatalf("startGroup of a group the node runs = %v, want nil", err)
	}
	reply.Store(resptest.Err("ERR group 3: a group id is 1 to 65535"))
	if err := g.startGroup(ctx, node.Addr, args); err == nil || !strings.Contains(err.Error(), "a group id is") {
		t.Fatalf("startGroup refused = %v, want the refusal", err)
	}
}
