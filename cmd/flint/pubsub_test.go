package main

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestPublishAcrossGroup checks that a message published on one member of
// a replicated group of real processes reaches a subscriber of another,
// and that PUBLISH counts the subscribers of the member it was sent to.
func TestPublishAcrossGroup(t *testing.T) {
	g := startGroup(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sub := redis.NewClient(&redis.Options{Addr: g.addrs[1]})
	defer sub.Close()
	ps := sub.Subscribe(ctx, "news")
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	pub := redis.NewClient(&redis.Options{Addr: g.addrs[0]})
	defer pub.Close()
	for i, want := range []string{"one", "two"} {
		if n, err := pub.Publish(ctx, "news", want).Result(); err != nil || n != 0 {
			t.Fatalf("PUBLISH at member 1 = %d (%v), want 0: its subscribers only", n, err)
		}
		m, err := ps.ReceiveMessage(ctx)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if m.Channel != "news" || m.Payload != want {
			t.Fatalf("message %d = %s %s, want news %s", i, m.Channel, m.Payload, want)
		}
	}
	local := redis.NewClient(&redis.Options{Addr: g.addrs[1]})
	defer local.Close()
	if n, err := local.Publish(ctx, "news", "three").Result(); err != nil || n != 1 {
		t.Fatalf("PUBLISH at member 2 = %d (%v), want 1", n, err)
	}
}
