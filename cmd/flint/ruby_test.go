package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestRedisRuby runs testdata/client.rb against a group of three: redis-rb,
// Ruby's Redis client, as an application uses it, with its cluster client
// (which routes by CLUSTER SLOTS and COMMAND) for keys, a lock taken with
// SET NX PX, TTLs, a transaction with a runtime error in it, a pipeline and
// SCAN, and a plain client for WATCH and pub/sub across members.
func TestRedisRuby(t *testing.T) {
	ruby := redisRuby(t)
	g := startGroup(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g.leader(ctx)
	out, err := exec.CommandContext(ctx, ruby, "testdata/client.rb", strings.Join(g.addrs, ",")).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("client.rb: %v\n%s", err, out)
	}
}

// redisRuby returns the path of a Ruby that has redis-rb: $FLINT_RUBY, else
// ruby on PATH (`make clients` installs Debian's ruby-redis).
func redisRuby(t *testing.T) string {
	t.Helper()
	name := cmp.Or(os.Getenv("FLINT_RUBY"), "ruby")
	path, err := exec.LookPath(name)
	if err == nil {
		err = exec.Command(path, "-e", `require "redis"`).Run()
	}
	if err != nil {
		missingClient(t, fmt.Sprintf("no Ruby with redis-rb (%s: %v)", name, err))
	}
	return path
}
