package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/flintkv/flint/client"
	"github.com/flintkv/flint/internal/server"
	"github.com/flintkv/flint/internal/server/servertest"
)

// connect starts a server with cfg and returns a client of it. Both are
// closed when the test ends, and the test then fails if any goroutine of
// the client is left.
func connect(t testing.TB, cfg server.Config, opts ...client.Option) (*servertest.Server, *client.Client) {
	t.Helper()
	noLeaks(t)
	srv := servertest.Start(t, cfg)
	c, err := client.New(srv.Addr, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return srv, c
}

// noLeaks fails the test if, once its other cleanups have run, goroutines of
// the client's connections remain.
func noLeaks(t testing.TB) {
	t.Helper()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for {
			buf := make([]byte, 1<<20)
			stacks := string(buf[:runtime.Stack(buf, true)])
			if !strings.Contains(stacks, "flint/client.(*conn)") {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("client goroutines left after Close:\n%s", stacks)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// must fails the test on err.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestMethods(t *testing.T) {
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) {
			_, c := connect(t, server.Config{}, client.WithProtocol(proto))
			testMethods(t, c)
		})
	}
}

func testMethods(t *testing.T, c *client.Client) {
	ctx := ctxT(t)
	if _, err := c.Get(ctx, "k"); !errors.Is(err, client.ErrNil) {
		t.Fatalf("Get of a missing key: err %v, want ErrNil", err)
	}
	must(t, c.Set(ctx, "k", []byte("v1")))
	if v, err := c.Get(ctx, "k"); err != nil || string(v) != "v1" {
		t.Fatalf("Get = %q, %v; want v1", v, err)
	}
	if old, err := c.Swap(ctx, "k", []byte("v2")); err != nil || string(old) != "v1" {
		t.Fatalf("Swap = %q, %v; want v1", old, err)
	}
	if _, err := c.Swap(ctx, "new", []byte("x")); !errors.Is(err, client.ErrNil) {
		t.Fatalf("Swap of a missing key: err %v, want ErrNil", err)
	}
	if ok, err := c.CAS(ctx, "k", []byte("wrong"), []byte("v3")); err != nil || ok {
		t.Fatalf("CAS with the wrong expected value = %v, %v; want false", ok, err)
	}
	if ok, err := c.CAS(ctx, "k", []byte("v2"), []byte("v3")); err != nil || !ok {
		t.Fatalf("CAS = %v, %v; want true", ok, err)
	}
	must(t, c.MSet(ctx, client.KV{Key: "a", Value: []byte("1")}, client.KV{Key: "b", Value: []byte("2")},
		client.KV{Key: "c", Value: []byte("3")}))
	vals, err := c.MGet(ctx, "a", "missing", "c")
	if err != nil || len(vals) != 3 || string(vals[0]) != "1" || vals[1] != nil || string(vals[2]) != "3" {
		t.Fatalf("MGet = %q, %v; want [1 nil 3]", vals, err)
	}
	testRange(t, c)
	if n, err := c.Delete(ctx, "a", "b", "missing"); err != nil || n != 2 {
		t.Fatalf("Delete = %d, %v; want 2", n, err)
	}
	for want := int64(1); want <= 3; want++ {
		if n, err := c.Incr(ctx, "counter"); err != nil || n != want {
			t.Fatalf("Incr = %d, %v; want %d", n, err, want)
		}
	}
	testDo(t, c)
}

func testRange(t *testing.T, c *client.Client) {
	ctx := ctxT(t)
	kvs, err := c.Range(ctx, "a", "c", 0)
	if err != nil || fmt.Sprint(kvs) != "[{a [49]} {b [50]} {c [51]}]" {
		t.Fatalf("Range a..c = %v, %v", kvs, err)
	}
	kvs, err = c.Range(ctx, "b", "zz", 2)
	if err != nil || fmt.Sprint(kvs) != "[{b [50]} {c [51]}]" {
		t.Fatalf("Range b..zz limit 2 = %v, %v", kvs, err)
	}
	kvs, err = c.Range(ctx, "x", "y", 0)
	if err != nil || len(kvs) != 0 {
		t.Fatalf("empty Range = %v, %v", kvs, err)
	}
}

func testDo(t *testing.T, c *client.Client) {
	ctx := ctxT(t)
	v, err := c.Do(ctx, "SET", "d", []byte("1"), "GET")
	if err != nil || v.Kind != client.KindNull {
		t.Fatalf("SET GET of a new key = %v, %v; want nil", v, err)
	}
	v, err = c.Do(ctx, "SET", "d", 2, "GET")
	if err != nil || string(v.Str) != "1" {
		t.Fatalf("SET GET = %v, %v; want 1", v, err)
	}
	v, err = c.Do(ctx, "INCRBY", "d", int64(40))
	if err != nil || v.Int != 42 {
		t.Fatalf("INCRBY = %v, %v; want 42", v, err)
	}
	if _, err := c.Do(ctx, "ECHO", struct{}{}); err == nil {
		t.Fatal("Do with an unsupported argument type did not fail")
	}
	if _, err := c.Do(ctx); err == nil {
		t.Fatal("Do with no command did not fail")
	}
}

func TestReplyError(t *testing.T) {
	_, c := connect(t, server.Config{})
	ctx := ctxT(t)
	_, err := c.Do(ctx, "NOSUCHCOMMAND", "x")
	var re *client.ReplyError
	if !errors.As(err, &re) || re.Code() != "ERR" || !strings.Contains(re.Msg, "unknown command") {
		t.Fatalf("unknown command: err %v, want a ReplyError with code ERR", err)
	}
	must(t, c.Set(ctx, "s", []byte("not a number")))
	if _, err := c.Incr(ctx, "s"); !errors.As(err, &re) || re.Code() != "ERR" {
		t.Fatalf("Incr of a string: err %v, want a ReplyError", err)
	}
	if v, err := c.Get(ctx, "s"); err != nil || string(v) != "not a number" {
		t.Fatalf("Get after an error reply = %q, %v", v, err)
	}
}

func TestAuth(t *testing.T) {
	srv, c := connect(t, server.Config{RequirePass: "pw"}, client.WithPassword("pw"))
	ctx := ctxT(t)
	must(t, c.Set(ctx, "k", []byte("v")))

	for _, proto := range []int{2, 3} {
		c3, err := client.New(srv.Addr, client.WithPassword("pw"), client.WithProtocol(proto))
		must(t, err)
		if v, err := c3.Get(ctx, "k"); err != nil || string(v) != "v" {
			t.Errorf("RESP%d with AUTH: Get = %q, %v", proto, v, err)
		}
		c3.Close()

		_, err = client.New(srv.Addr, client.WithPassword("wrong"), client.WithProtocol(proto))
		var re *client.ReplyError
		if !errors.Is(err, client.ErrConnect) || !errors.As(err, &re) || re.Code() != "WRONGPASS" {
			t.Errorf("RESP%d, wrong password: err %v, want ErrConnect and WRONGPASS", proto, err)
		}
	}

	anon, err := client.New(srv.Addr)
	must(t, err)
	defer anon.Close()
	var re *client.ReplyError
	if _, err := anon.Get(ctx, "k"); !errors.As(err, &re) || re.Code() != "NOAUTH" {
		t.Fatalf("Get without AUTH: err %v, want NOAUTH", err)
	}
}

func TestDialError(t *testing.T) {
	noLeaks(t)
	addr := freeAddr(t)
	_, err := client.New(addr, client.WithDialTimeout(time.Second))
	if !errors.Is(err, client.ErrConnect) || errors.Is(err, client.ErrUnknownOutcome) {
		t.Fatalf("New of a closed port: err %v, want ErrConnect", err)
	}
	if _, err := client.New(addr, client.WithPoolSize(0)); err == nil {
		t.Fatal("New with pool size 0 did not fail")
	}
}

// freeAddr returns a loopback address that nothing listens on.
func freeAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestClose(t *testing.T) {
	_, c := connect(t, server.Config{})
	must(t, c.Close())
	must(t, c.Close())
	if _, err := c.Get(ctxT(t), "k"); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Get after Close: err %v, want ErrClosed", err)
	}
	if _, err := c.Batch().Exec(ctxT(t)); err != nil {
		t.Fatalf("empty batch after Close: %v", err)
	}
}

func TestBatch(t *testing.T) {
	_, c := connect(t, server.Config{})
	ctx := ctxT(t)
	const n = 10000
	b := c.Batch()
	for i := range n {
		b.Set(fmt.Sprintf("key%05d", i), []byte(fmt.Sprint(i)))
	}
	replies, err := b.Exec(ctx)
	must(t, err)
	if len(replies) != n || b.Len() != 0 {
		t.Fatalf("Exec gave %d replies and left %d commands; want %d and 0", len(replies), b.Len(), n)
	}
	for i := range n {
		b.Get(fmt.Sprintf("key%05d", i))
	}
	b.Incr("key00001")
	b.Do("INCR", "key00001", "extra") // wrong arity: an error reply in the slice
	b.Get("missing")
	replies, err = b.Exec(ctx)
	must(t, err)
	if len(replies) != n+3 {
		t.Fatalf("Exec gave %d replies, want %d", len(replies), n+3)
	}
	for i := range n {
		if string(replies[i].Str) != fmt.Sprint(i) {
			t.Fatalf("reply %d = %v, want %d", i, replies[i], i)
		}
	}
	if r := replies[n:]; r[0].Int != 2 || !r[1].IsError() || r[2].Kind != client.KindNull {
		t.Fatalf("last replies = %v, want 2, an error, nil", r)
	}
}

func TestBatchCommands(t *testing.T) {
	_, c := connect(t, server.Config{})
	b := c.Batch()
	b.Set("a", []byte("1"))
	b.Swap("a", []byte("2"))
	b.CAS("a", []byte("2"), []byte("3"))
	b.Range("a", "z", 1)
	b.Delete("a")
	b.Do("GET", "a")
	replies, err := b.Exec(ctxT(t))
	must(t, err)
	want := `["OK" "1" 1 ["a" "3"] 1 (nil)]`
	if got := fmt.Sprint(replies); got != want {
		t.Fatalf("replies = %s, want %s", got, want)
	}
	b.Get("x")
	b.Do(1.5, true, uint64(7), nil)
	if _, err := b.Exec(ctxT(t)); err == nil || b.Len() != 0 {
		t.Fatalf("Exec of a batch with a bad argument: err %v, %d left; want an error and none", err, b.Len())
	}
}

// TestConcurrent runs many goroutines at once over a small pool; run it with
// -race.
func TestConcurrent(t *testing.T) {
	_, c := connect(t, server.Config{}, client.WithPoolSize(3))
	// Its deadline only turns a hang into a failure: the 38,400 calls
	// take 3 to 6 s with -race on 2 shared cores, and ctxT's 20 s are not
	// far from what a busier machine makes of them.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const workers, calls = 64, 200
	errc := make(chan error, workers)
	for w := range workers {
		go func() { errc <- worker(ctx, c, w, calls) }()
	}
	for range workers {
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}
	if n, err := c.Incr(ctx, "shared"); err != nil || n != workers*calls+1 {
		t.Fatalf("shared counter = %d, %v; want %d", n, err, workers*calls+1)
	}
}

// worker writes and reads keys of its own, checking each answer, and
// increments a shared counter once per round.
func worker(ctx context.Context, c *client.Client, w, calls int) error {
	for i := range calls {
		key, val := fmt.Sprintf("w%d-%d", w, i%10), []byte(fmt.Sprintf("v%d", i))
		if err := c.Set(ctx, key, val); err != nil {
			return err
		}
		got, err := c.Get(ctx, key)
		if err != nil || !bytes.Equal(got, val) {
			return fmt.Errorf("worker %d: Get(%s) = %q, %v; want %q", w, key, got, err, val)
		}
		if _, err := c.Incr(ctx, "shared"); err != nil {
			return err
		}
	}
	return nil
}
