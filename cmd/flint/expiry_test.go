package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestRedisPyExpiry runs testdata/redislock.py against one member: redis-py
// sets and reads TTLs, and its Lock, taken with SET NX PX, frees itself
// once its timeout passes, with no other client writing meanwhile.
func TestRedisPyExpiry(t *testing.T) {
	py := redisPy(t)
	g := startGroup(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g.leader(ctx)
	out, err := exec.CommandContext(ctx, py, "testdata/redislock.py", g.addrs[0]).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("redislock.py: %v\n%s", err, out)
	}
}
