package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flintkv/flint/client"
	"github.com/flintkv/flint/internal/resptest"
	"github.com/flintkv/flint/internal/slot"
)

// These tests drive the client against a fake sharded cluster of three
// shards (resptest.Cluster), each the master of a third of the slots,
// which answers CLUSTER SLOTS with the three ranges and MOVED, ASK or
// CROSSSLOT as a sharded Flint or a Redis Cluster does.

// shardKeys returns n keys of the form key000 in each shard of cl, by
// shard.
func shardKeys(cl *resptest.Cluster, n int) [][]string {
	keys := make([][]string, len(cl.Servers))
	for i := 0; ; i++ {
		k := fmt.Sprintf("key%03d", i)
		s := cl.Shard(k)
		if len(keys[s]) < n {
			keys[s] = append(keys[s], k)
		}
		if !slices.ContainsFunc(keys, func(ks []string) bool { return len(ks) < n }) {
			return keys
		}
	}
}

// redirects fails the test if the cluster sent other than moved MOVED and
// asked ASK replies so far.
func redirects(t *testing.T, cl *resptest.Cluster, moved, asked int, when string) {
	t.Helper()
	if m, a := cl.Redirects(); m != moved || a != asked {
		t.Fatalf("%s: %d MOVED and %d ASK sent, want %d and %d", when, m, a, moved, asked)
	}
}

// TestClusterRouting checks that, once the client has the map, every key
// goes straight to the shard that owns it, from many goroutines at once.
func TestClusterRouting(t *testing.T) {
	cl := resptest.StartCluster(t, 3)
	c := newClient(t, cl.Servers[1].Addr)
	ctx := ctxT(t)
	var wg sync.WaitGroup
	for w := range 10 {
		wg.Go(func() {
			for i := range 30 {
				k, v := fmt.Sprintf("w%d-%d", w, i), []byte(fmt.Sprint(i))
				if err := c.Set(ctx, k, v); err != nil {
					t.Error(err)
					return
				}
				if got, err := c.Get(ctx, k); err != nil || string(got) != string(v) {
					t.Errorf("Get(%s) = %q, %v; want %s", k, got, err, v)
					return
				}
			}
		})
	}
	wg.Wait()
	redirects(t, cl, 0, 0, "300 keys set and read")
	total := 0
	for s := range cl.Servers {
		if n := cl.Count(s, "SET"); n == 0 || n != cl.Count(s, "GET") {
			t.Errorf("shard %d got %d SETs and %d GETs; want some, as many of each", s, n, cl.Count(s, "GET"))
		}
		total += cl.Count(s, "SET")
	}
	if total != 300 {
		t.Fatalf("the shards got %d SETs in all, want 300", total)
	}
}

// TestClusterBatch sends a batch over keys of all three shards: each
// shard gets its commands in order (a GET after a SET of its key sees it),
// and the replies come back in the batch's order.
func TestClusterBatch(t *testing.T) {
	cl := resptest.StartCluster(t, 3)
	c := newClient(t, cl.Servers[0].Addr)
	keys := shardKeys(cl, 5)
	b := c.Batch()
	var want []string
	for i := range 5 {
		for s := range keys {
			k := keys[s][i]
			b.Set(k, []byte("v-"+k))
			b.Get(k)
			b.Incr("n-" + k)
			b.Incr("n-" + k)
			want = append(want, "OK", "v-"+k, "1", "2")
		}
	}
	b.Do("MGET", keys[0][0], keys[1][0], keys[2][0], "nosuchkey")
	want = append(want, fmt.Sprintf("[%q %q %q (nil)]", "v-"+keys[0][0], "v-"+keys[1][0], "v-"+keys[2][0]))
	replies, err := b.Exec(ctxT(t))
	must(t, err)
	var got []string
	for _, v := range replies {
		switch v.Kind {
		case client.KindArray:
			got = append(got, v.String())
		case client.KindInt:
			got = append(got, fmt.Sprint(v.Int))
		default:
			got = append(got, string(v.Str))
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("replies\n%q\nwant\n%q", got, want)
	}
	redirects(t, cl, 0, 0, "a batch over three shards")
}

// TestClusterMoved moves a slot to another shard behind the client's
// back: the client follows the MOVED, and then sends that slot's keys to
// their new shard and the rest of the old range's to the old one, with no
// redirect.
func TestClusterMoved(t *testing.T) {
	cl := resptest.StartCluster(t, 3)
	c := newClient(t, cl.Servers[0].Addr)
	ctx := ctxT(t)
	keys := shardKeys(cl, 2)
	moving, staying := keys[2][0], keys[2][1]
	for _, k := range []string{moving, staying} {
		must(t, c.Set(ctx, k, []byte("v-"+k)))
	}
	s := slot.Of([]byte(moving))
	if slot.Of([]byte(staying)) == s {
		t.Fatalf("%s and %s share slot %d: the test needs two", moving, staying, s)
	}
	cl.Move(s, s, 0)
	for i := range 3 {
		if v, err := c.Get(ctx, moving); err != nil || string(v) != "v-"+moving {
			t.Fatalf("Get(%s) after its slot moved = %q, %v", moving, v, err)
		}
		redirects(t, cl, 1, 0, fmt.Sprintf("Get %d after the move", i+1))
	}
	if v, err := c.Get(ctx, staying); err != nil || string(v) != "v-"+staying {
		t.Fatalf("Get(%s) = %q, %v", staying, v, err)
	}
	redirects(t, cl, 1, 0, "a key of the old range's other slots")
	if n := cl.Count(0, "GET"); n != 3 {
		t.Fatalf("the new owner got %d GETs, want 3", n)
	}
}

// TestClusterAsk migrates a slot whose key is at the importing shard
// already: the owner answers ASK, and the client sends ASKING and the
// command to the importing shard once, leaving its map as it was: the next
// call goes to the owner again.
func TestClusterAsk(t *testing.T) {
	cl := resptest.StartCluster(t, 3)
	c := newClient(t, cl.Servers[0].Addr)
	ctx := ctxT(t)
	keys := shardKeys(cl, 2)
	k, other := keys[0][0], keys[0][1]
	must(t, c.Set(ctx, other, []byte("here")))
	cl.Migrate(slot.Of([]byte(k)), 1)
	cl.Put(1, k, "there")
	for i := range 2 {
		if v, err := c.Get(ctx, k); err != nil || string(v) != "there" {
			t.Fatalf("Get(%s) of a key that moved = %q, %v; want there", k, v, err)
		}
		redirects(t, cl, 0, i+1, fmt.Sprintf("Get %d", i+1))
		if a, g0, g1 := cl.Count(1, "ASKING"), cl.Count(0, "GET"), cl.Count(1, "GET"); a != i+1 || g0 != i+1 || g1 != i+1 {
			t.Fatalf("after Get %d: %d ASKING and %d GETs at the importing shard, %d GETs at the owner; want %d of each",
				i+1, a, g1, g0, i+1)
		}
	}
	b := c.Batch() // in a batch, with a key the owner still holds
	b.Get(other)
	b.Get(k)
	b.Get(keys[1][0])
	replies, err := b.Exec(ctx)
	if err != nil || fmt.Sprint(replies) != `["here" "there" (nil)]` {
		t.Fatalf("batch = %v, %v", replies, err)
	}
	redirects(t, cl, 0, 3, "the batch")
}

// TestClusterCrossSlot checks the commands of several keys in several
// slots: the writes get the server's CROSSSLOT, sent once; the reads are
// split by slot and their replies put together; keys that share a hash
// tag go together.
func TestClusterCrossSlot(t *testing.T) {
	cl := resptest.StartCluster(t, 3)
	c := newClient(t, cl.Servers[0].Addr)
	ctx := ctxT(t)
	keys := shardKeys(cl, 1)
	a, b, d := keys[0][0], keys[1][0], keys[2][0]
	err := c.MSet(ctx, client.KV{Key: a, Value: []byte("1")}, client.KV{Key: b, Value: []byte("2")})
	if re, ok := errors.AsType[*client.ReplyError](err); !ok || re.Code() != "CROSSSLOT" {
		t.Fatalf("MSet over two shards = %v, want CROSSSLOT", err)
	}
	_, err = c.Delete(ctx, a, b)
	if re, ok := errors.AsType[*client.ReplyError](err); !ok || re.Code() != "CROSSSLOT" {
		t.Fatalf("Delete over two shards = %v, want CROSSSLOT", err)
	}
	if n := cl.Count(0, "MSET") + cl.Count(0, "DEL"); n != 2 {
		t.Fatalf("MSET and DEL sent %d times, want once each", n)
	}
	must(t, c.MSet(ctx, client.KV{Key: "{t}a", Value: []byte("ta")}, client.KV{Key: "{t}b", Value: []byte("tb")}))
	for _, k := range []string{a, b, d} {
		must(t, c.Set(ctx, k, []byte("v-"+k)))
	}
	vals, err := c.MGet(ctx, d, "{t}a", a, "nosuchkey", b, "{t}b")
	want := fmt.Sprintf("[v-%s ta v-%s  v-%s tb]", d, a, b)
	if err != nil || fmt.Sprintf("%s", vals) != want {
		t.Fatalf("MGet over three shards = %s, %v; want %s", vals, err, want)
	}
	if v, err := c.Do(ctx, "EXISTS", a, b, d, "nosuchkey", a); err != nil || v.Int != 4 {
		t.Fatalf("EXISTS over three shards = %v, %v; want 4", v, err)
	}
	redirects(t, cl, 0, 0, "the commands of several keys")
}

// TestClusterRange fills the three shards and checks that RANGE, from
// Range, a Batch and Do, returns the keys of all of them in order, with
// its limit applied to the whole; a key that two shards hold (a slot
// being moved) comes once, with its owner's value.
func TestClusterRange(t *testing.T) {
	cl := resptest.StartCluster(t, 3)
	c := newClient(t, cl.Servers[2].Addr)
	ctx := ctxT(t)
	all := setKeys(t, c, 100)
	stale := all[17].Key
	cl.Put((cl.Shard(stale)+1)%3, stale, "stale")
	for _, tc := range []struct {
		start, end string
		limit      int
		want       []client.KV
	}{
		{"key010", "key060", 0, all[10:61]},
		{"", "\xff", 0, all},
		{"key010", "key060", 7, all[10:17]},
		{"key015", "key099", 30, all[15:45]},
		{"key098", "zzz", 30, all[98:]},
		{"key0999", "key0a", 0, nil},
	} {
		got, err := c.Range(ctx, tc.start, tc.end, tc.limit)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Fatalf("Range(%q, %q, %d) = %v, %v;\nwant %v", tc.start, tc.end, tc.limit, got, err, tc.want)
		}
	}
	b := c.Batch()
	b.Range("key000", "key999", 5)
	b.Do("RANGE", "key090", "key999")
	replies, err := b.Exec(ctx)
	must(t, err)
	if got, want := fmt.Sprint(replies), `[["key000" "0" "key001" "1" "key002" "2" "key003" "3" "key004" "4"] `+
		`["key090" "90" "key091" "91" "key092" "92" "key093" "93" "key094" "94" "key095" "95" "key096" "96" "key097" "97" "key098" "98" "key099" "99"]]`; got != want {
		t.Fatalf("RANGE in a batch = %s, want %s", got, want)
	}
	for s := range cl.Servers {
		if n := cl.Count(s, "RANGE"); n != 8 {
			t.Errorf("shard %d got %d RANGEs, want 8 (every one)", s, n)
		}
	}
}

// TestClusterRangeAfterSplit moves slots with keys to a shard the
// Client's map does not name, as a split moves them to a new group, with
// no MOVED to tell the Client: its RANGE still returns every key, since it
// finds the map changed when it checks the members' maps after the
// fan-out, and runs the RANGE again in the new one.
func TestClusterRangeAfterSplit(t *testing.T) {
	cl := resptest.StartCluster(t, 3)
	cl.Move(2*16384/3, 16383, 1) // shard 2 starts with no slots: a new group
	c := newClient(t, cl.Servers[0].Addr)
	ctx := ctxT(t)
	all := setKeys(t, c, 100)
	cl.Move(2*16384/3, 16383, 2) // the split
	moved := 0
	for _, kv := range all {
		if cl.Shard(kv.Key) == 2 {
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("no key moved to shard 2; the test needs some")
	}
	got, err := c.Range(ctx, "", "\xff", 0)
	if err != nil || fmt.Sprint(got) != fmt.Sprint(all) {
		t.Fatalf("Range after the split = %v, %v;\nwant %v", got, err, all)
	}
	b := c.Batch()
	b.Set("key000", []byte("new"))
	b.Range("key000", "key999", 0)
	replies, err := b.Exec(ctx)
	must(t, err)
	if got := replies[1]; len(got.Elems) != 2*len(all) || string(got.Elems[1].Str) != "new" {
		t.Fatalf("RANGE in a batch after the split = %v; want the %d keys, key000 new", got, len(all))
	}
	if n := cl.Count(2, "RANGE"); n != 2 {
		t.Errorf("shard 2 got %d RANGEs, want 2 (each after the Client learned the split)", n)
	}
}

// setKeys sets key000, key001, ... to 0, 1, ..., n of them, and returns
// them in order.
func setKeys(t *testing.T, c *client.Client, n int) []client.KV {
	t.Helper()
	var all []client.KV
	b := c.Batch()
	for i := range n {
		kv := client.KV{Key: fmt.Sprintf("key%03d", i), Value: []byte(fmt.Sprint(i))}
		all = append(all, kv)
		b.Set(kv.Key, kv.Value)
	}
	_, err := b.Exec(ctxT(t))
	must(t, err)
	return all
}

// TestClusterShardDown stops one shard: calls on its keys wait, and so
// does a RANGE, which needs every shard, while calls on the others' keys
// go on; once it is back, the waiting calls are answered.
func TestClusterShardDown(t *testing.T) {
	cl := resptest.StartCluster(t, 3)
	c := newClient(t, cl.Servers[0].Addr)
	ctx := ctxT(t)
	keys := shardKeys(cl, 3)
	for s := range keys {
		for _, k := range keys[s] {
			must(t, c.Set(ctx, k, []byte("v-"+k)))
		}
	}
	cl.Servers[1].Stop()
	type result struct {
		v   string
		err error
	}
	get := make(chan result, 1)
	go func() {
		v, err := c.Get(ctx, keys[1][0])
		get <- result{string(v), err}
	}()
	rng := make(chan result, 1)
	go func() {
		kvs, err := c.Range(ctx, "", "\xff", 0)
		rng <- result{fmt.Sprint(len(kvs)), err}
	}()
	for range 5 {
		for _, s := range []int{0, 2} {
			for _, k := range keys[s] {
				if v, err := c.Get(ctx, k); err != nil || string(v) != "v-"+k {
					t.Fatalf("Get(%s) of a shard that is up = %q, %v", k, v, err)
				}
				must(t, c.Set(ctx, k, []byte("v-"+k)))
			}
		}
	}
	select {
	case r := <-get:
		t.Fatalf("Get of a key of the shard that is down returned %q, %v while it was down", r.v, r.err)
	case r := <-rng:
		t.Fatalf("Range returned %s pairs, %v while a shard was down", r.v, r.err)
	default:
	}
	cl.Servers[1].Restart(t)
	for _, ch := range []chan result{get, rng} {
		done := make(chan struct{})
		var r result
		go func() { r = <-ch; close(done) }()
		within(t, done, "the call to be answered once the shard is back")
		if r.err != nil || r.v != "v-"+keys[1][0] && r.v != "9" {
			t.Fatalf("call once the shard is back = %q, %v", r.v, r.err)
		}
	}
}

// TestClusterSessions writes with sessions over three shards, whose
// groups each know only the sessions they opened: the client opens one in
// each, and sends each write in its shard's. After a slot moves, the
// write that the new owner refuses as of an unknown session goes again in
// a session of the new owner's.
func TestClusterSessions(t *testing.T) {
	cl := resptest.StartCluster(t, 3)
	c := newClient(t, cl.Servers[0].Addr, client.WithSessions())
	ctx := ctxT(t)
	keys := shardKeys(cl, 3)
	var wg sync.WaitGroup
	for s := range keys {
		for _, k := range keys[s] {
			wg.Go(func() {
				for i := range 5 {
					if n, err := c.Incr(ctx, k); err != nil || n != int64(i+1) {
						t.Errorf("Incr(%s) = %d, %v; want %d", k, n, err, i+1)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	b := c.Batch()
	for s := range keys {
		b.Incr(keys[s][0])
		b.Get(keys[s][0])
	}
	replies, err := b.Exec(ctx)
	if err != nil || fmt.Sprint(replies) != `[6 "6" 6 "6" 6 "6"]` {
		t.Fatalf("batch of writes to three shards = %v, %v", replies, err)
	}
	for s := range cl.Servers {
		if n := cl.Count(s, "FLINT.SESSION"); n != 1 {
			t.Errorf("shard %d opened %d sessions, want 1", s, n)
		}
	}
	k := keys[2][0]
	cl.Move(slot.Of([]byte(k)), slot.Of([]byte(k)), 0)
	if n, err := c.Incr(ctx, k); err != nil || n != 7 {
		t.Fatalf("Incr(%s) after its slot moved = %d, %v; want 7", k, n, err)
	}
	if n := cl.Count(0, "FLINT.SESSION"); n != 2 {
		t.Fatalf("the new owner opened %d sessions, want 2 (one for the moved slot)", n)
	}
}

// TestClusterSessionAsked: a slot move copies the source's sessions to the
// target before the source gives the slots up (docs/SHARDING.md, "Moving
// slots", steps 5 and 6), so a session the source opened after the copy
// is unknown to the target. A write in it to a slot the source has given
// up goes to the target after ASK, which refuses it SESSIONEXPIRED; the
// client's map still names the source, so the write is sent again in a
// session opened at the target, where it applies, and not in a new one of
// the source's, which the target would refuse too. The source's session
// stays open for the slots the source serves, and the next write that
// the target refuses so goes again in the same session of the target's.
func TestClusterSessionAsked(t *testing.T) {
	cl, c, k, staying := startAsked(t)
	ctx := ctxT(t)
	for i := range 2 {
		if n, err := c.Incr(ctx, k); err != nil || n != int64(i+1) {
			t.Fatalf("Incr(%s) %d, its slot moving to a group that does not know the session = %d, %v; want %d", k, i+1, n, err, i+1)
		}
	}
	must(t, c.Set(ctx, staying, []byte("2")))
	if o, a := cl.Count(0, "FLINT.SESSION"), cl.Count(1, "FLINT.SESSION"); o != 1 || a != 1 {
		t.Fatalf("the source opened %d sessions and the target %d, want one each", o, a)
	}
	if n := cl.Count(1, "FLINT.SEQ"); n != 4 {
		t.Fatalf("the target got %d writes, want 4: each INCR refused in the source's session, then applied in its own", n)
	}
	if n := cl.Count(0, "FLINT.SEQ"); n != 6 {
		t.Fatalf("the source got %d writes, want 6: 2 SETs, and each INCR twice, answered ASK", n)
	}
}

// startAsked starts a cluster and a client with sessions, opens the
// source's session with a SET of staying, and starts migrating k's slot,
// of the same shard, to shard 1, which does not know the session: the
// source answers ASK for k, which it does not hold.
func startAsked(t *testing.T) (cl *resptest.Cluster, c *client.Client, k, staying string) {
	cl = resptest.StartCluster(t, 3)
	c = newClient(t, cl.Servers[0].Addr, client.WithSessions())
	keys := shardKeys(cl, 2)
	k, staying = keys[0][0], keys[0][1]
	if slot.Of([]byte(k)) == slot.Of([]byte(staying)) {
		t.Fatalf("%s and %s share a slot: the test needs two", k, staying)
	}
	must(t, c.Set(ctxT(t), staying, []byte("1")))
	cl.Migrate(slot.Of([]byte(k)), 1)
	return cl, c, k, staying
}

// TestClusterSessionAskedBatch: as TestClusterSessionAsked, with the
// writes that the target refuses in a batch among other commands: each
// goes again on its own, in the session opened at the target, and its
// reply takes its place in the batch's.
func TestClusterSessionAskedBatch(t *testing.T) {
	cl, c, k, staying := startAsked(t)
	ctx := ctxT(t)
	b := c.Batch()
	b.Incr(k)
	b.Set(staying, []byte("2"))
	b.Incr(k)
	b.Get(staying)
	vs, err := b.Exec(ctx)
	if err != nil || len(vs) != 4 || vs[0].Int != 1 || string(vs[1].Str) != "OK" || vs[2].Int != 2 || string(vs[3].Str) != "2" {
		t.Fatalf("batch of INCR %s (its slot moving to a group that does not know the session), SET, INCR, GET = %v, %v; want 1, OK, 2, 2",
			k, vs, err)
	}
	if o, a := cl.Count(0, "FLINT.SESSION"), cl.Count(1, "FLINT.SESSION"); o != 1 || a != 1 {
		t.Fatalf("the source opened %d sessions and the target %d, want one each", o, a)
	}
	if n := cl.Count(1, "FLINT.SEQ"); n != 4 {
		t.Fatalf("the target got %d writes, want 4: each INCR refused in the source's session, then applied in its own", n)
	}
}

// TestClusterSessionAskedOnward: a write's slot moves from group A to B,
// and on from B to C, before the client learns a map that names either.
// B refuses the write in A's session, and C the write in the session the
// client opened at B (it opened it before C copied B's sessions): each
// refusal comes from a member other than the one that opened the session,
// so the write goes again in a session opened at the member that refused
// it, and applies once, at C.
func TestClusterSessionAskedOnward(t *testing.T) {
	var mu sync.Mutex
	var got []string
	var a, b, c *resptest.Server
	bMovedOn := false // B has given the slot to C
	member := func(name string, id int64, h func(args []string) string) resptest.Handler {
		return func(args []string) string {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, name+": "+strings.Join(args, " "))
			switch strings.ToUpper(args[0]) {
			case "CLUSTER":
				return resptest.Array(slotsRange(0, 8191, a.Addr), slotsRange(8192, slot.Count-1, c.Addr))
			case "ASKING":
				return resptest.OK
			case "FLINT.SESSION":
				return resptest.Int(id)
			}
			return h(args)
		}
	}
	expired := resptest.Err("SESSIONEXPIRED the client session expired or is unknown; open a new one with FLINT.SESSION")
	a = resptest.Start(t, member("A", 1, func(args []string) string {
		return resptest.Err(fmt.Sprintf("ASK %d %s", slot.Of([]byte(args[5])), b.Addr))
	}))
	b = resptest.Start(t, member("B", 2, func(args []string) string {
		if bMovedOn {
			return resptest.Err(fmt.Sprintf("ASK %d %s", slot.Of([]byte(args[5])), c.Addr))
		}
		bMovedOn = true // once the client opened its session here
		return expired
	}))
	c = resptest.Start(t, member("C", 3, func(args []string) string {
		if args[1] != "3" {
			return expired
		}
		return resptest.Int(1)
	}))
	cl := newClient(t, a.Addr, client.WithSessions())
	k := "key"
	for slot.Of([]byte(k)) > 8191 {
		k += "+"
	}
	if n, err := cl.Incr(ctxT(t), k); err != nil || n != 1 {
		t.Fatalf("Incr(%s) = %d, %v; want 1", k, n, err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{
		"A: CLUSTER INFO", "A: CLUSTER SLOTS", "A: FLINT.SESSION", "A: FLINT.SEQ 1 1 1 INCR " + k, "B: ASKING", "B: FLINT.SEQ 1 1 1 INCR " + k,
		"B: FLINT.SESSION", "A: FLINT.SEQ 2 1 1 INCR " + k, "B: ASKING", "B: FLINT.SEQ 2 1 1 INCR " + k, "C: ASKING", "C: FLINT.SEQ 2 1 1 INCR " + k,
		"C: FLINT.SESSION", "A: FLINT.SEQ 3 1 1 INCR " + k, "B: ASKING", "B: FLINT.SEQ 3 1 1 INCR " + k, "C: ASKING", "C: FLINT.SEQ 3 1 1 INCR " + k,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the members got\n%q\nwant\n%q", got, want)
	}
}

// slotsRange is a range of a CLUSTER SLOTS reply: the slots first..last,
// served by the master at addr.
func slotsRange(first, last int, addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	return resptest.Array(resptest.Int(int64(first)), resptest.Int(int64(last)), resptest.Array(resptest.Bulk(host), resptest.Int(int64(p))))
}

// TestClusterNotSharded checks that a client of a server without CLUSTER
// SLOTS sends everything to it, as one target, RANGE and MGET as they
// are, once it asked for CLUSTER INFO and SLOTS.
func TestClusterNotSharded(t *testing.T) {
	var n counts
	srv := resptest.Start(t, counted(&n, resptest.Store{"a": "1", "b": "2"}))
	c := newClient(t, srv.Addr)
	ctx := ctxT(t)
	kvs, err := c.Range(ctx, "a", "z", 1)
	if err != nil || fmt.Sprint(kvs) != "[{a [49]}]" {
		t.Fatalf("Range = %v, %v", kvs, err)
	}
	vals, err := c.MGet(ctx, "a", "b", "c")
	if err != nil || fmt.Sprintf("%s", vals) != "[1 2 ]" {
		t.Fatalf("MGet = %s, %v", vals, err)
	}
	if n.get("RANGE") != 1 || n.get("MGET") != 1 || n.get("CLUSTER") != 2 {
		t.Fatalf("the server got %d RANGE, %d MGET, %d CLUSTER; want one, one and two", n.get("RANGE"), n.get("MGET"), n.get("CLUSTER"))
	}
}

// TestClusterStaleMap: a member whose map lags (it answers CLUSTER SLOTS
// and INFO from the map before a slot moved) must not take the client's
// map back to it. The client learns the map after the move (epoch 2) from
// shard 0; then shard 0 stops, and the refresh that its failure asks for
// reaches the lagging shard 1 (epoch 1) first. The moved key still goes
// straight to its new owner, with no MOVED.
func TestClusterStaleMap(t *testing.T) {
	cl := resptest.StartCluster(t, 3)
	keys := shardKeys(cl, 1)
	moving := keys[2][0]
	cl.Put(2, moving, "v-"+moving)
	cl.Lag(1)
	cl.Move(slot.Of([]byte(moving)), slot.Of([]byte(moving)), 1)
	c := newClient(t, cl.Servers[0].Addr) // learns the map of epoch 2
	ctx := ctxT(t)
	for _, ks := range keys { // connects to every shard
		must(t, c.Set(ctx, ks[0], []byte("v-"+ks[0])))
	}
	redirects(t, cl, 0, 0, "Sets routed by the map after the move")

	cl.Servers[0].Stop()
	asked := cl.Count(1, "CLUSTER")
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	c.Get(short, keys[0][0]) // fails, and asks for a refresh
	awaitCount(t, cl, 1, "CLUSTER", asked+2, "the lagging shard 1 to be asked for the map")
	for range 3 {
		if v, err := c.Get(ctx, moving); err != nil || string(v) != "v-"+moving {
			t.Fatalf("Get(%s) after a refresh from a lagging member = %q, %v", moving, v, err)
		}
		redirects(t, cl, 0, 0, "Get after a refresh from a member whose map lags")
		time.Sleep(10 * time.Millisecond) // the refresh's reply may still be on its way
	}
}

// awaitCount waits up to 10 s until shard of cl got at least n commands
// called name.
func awaitCount(t *testing.T, cl *resptest.Cluster, shard int, name string, n int, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); cl.Count(shard, name) < n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
