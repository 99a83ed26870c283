package main

import (
	"context"
	"fmt"
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

// TestPublishAcrossShards checks that in a sharded cluster a message
// published on any node reaches subscribers on every other: on a data
// node's and on the manager's.
func TestPublishAcrossShards(t *testing.T) {
	s := startSharded(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nodes := []string{s.manager, s.servers[0], s.servers[1]}
	var subs []*redis.PubSub
	for _, addr := range nodes {
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		ps := c.Subscribe(ctx, "news")
		defer ps.Close()
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		subs = append(subs, ps)
	}
	for i, from := range nodes {
		pub := redis.NewClient(&redis.Options{Addr: from})
		defer pub.Close()
		msg := fmt.Sprint("from ", from)
		if err := pub.Publish(ctx, "news", msg).Err(); err != nil {
			t.Fatal(err)
		}
		for j, ps := range subs {
			m, err := ps.ReceiveMessage(ctx)
			if err != nil {
				t.Fatalf("published at node %d, subscriber at node %d: %v", i, j, err)
			}
			if m.Payload != msg {
				t.Fatalf("published at node %d, subscriber at node %d got %q, want %q", i, j, m.Payload, msg)
			}
		}
	}
}
