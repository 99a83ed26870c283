package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flintkv/flint/internal/proctest"
)

// TestRedisPyIntrospection runs testdata/introspect.py, which reads INFO,
// CLIENT LIST, SLOWLOG, COMMAND and CONFIG through redis-py's parsers,
// against a server with a log, and finds commands' keys with the parser
// that redis-py's RedisCluster routes by (COMMAND's key positions and
// subcommands).
func TestRedisPyIntrospection(t *testing.T) {
	py := redisPy(t)
	srv := proctest.Serve(t, flintBin, "--fsync", "never")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "testdata/introspect.py", srv.Addr).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("introspect.py: %v\n%s", err, out)
	}
}

// TestWaitInGroup checks WAIT and INFO replication on a group of three:
// WAIT counts the followers that have the client's write, all of them
// while they are up, and only the live one once the other is killed.
func TestWaitInGroup(t *testing.T) {
	g := startGroup(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lead := g.leader(ctx)
	c := redis.NewClient(&redis.Options{Addr: g.addrs[lead], MaxRetries: -1})
	defer c.Close()
	conn := c.Conn()
	defer conn.Close()
	if err := conn.Set(ctx, "w1", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := conn.Wait(ctx, 2, 10*time.Second).Result(); err != nil || n != 2 {
		t.Fatalf("WAIT 2 10000 on a healthy group = %d, %v", n, err)
	}
	info := conn.Info(ctx, "replication").Val()
	if !strings.Contains(info, "role:master\r\nconnected_slaves:2\r\n") {
		t.Fatalf("INFO replication at the leader:\n%s", info)
	}
	follower := (lead + 1) % 3
	fc := redis.NewClient(&redis.Options{Addr: g.addrs[follower], MaxRetries: -1})
	defer fc.Close()
	finfo := fc.Info(ctx, "replication").Val()
	host, port, _ := strings.Cut(g.addrs[lead], ":")
	if !strings.Contains(finfo, fmt.Sprintf("role:slave\r\nmaster_host:%s\r\nmaster_port:%s\r\nmaster_link_status:up\r\n", host, port)) {
		t.Fatalf("INFO replication at a follower (the leader is %s):\n%s", g.addrs[lead], finfo)
	}
	if err := fc.Wait(ctx, 1, time.Second).Err(); err == nil || !strings.HasPrefix(err.Error(), "ERR WAIT cannot be used with replica instances") {
		t.Fatalf("WAIT at a follower: %v", err)
	}

	g.kill(follower)
	if err := conn.Set(ctx, "w2", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := conn.Wait(ctx, 2, 300*time.Millisecond).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 2 300 with a follower down = %d, %v; want 1", n, err)
	}
}
