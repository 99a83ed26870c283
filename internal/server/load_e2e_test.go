package server_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flintkv/flint/internal/server"
)

var seedFlag = flag.Uint64("seed", 0, "seed for the randomized end-to-end tests; 0 picks one")

// testSeed returns the seed to use and logs it, so that a failure can be
// replayed with -seed.
func testSeed(t *testing.T) uint64 {
	s := *seedFlag
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -seed=%d)", s, s)
	return s
}

// model is what the store should hold, for computing expected replies.
type model map[string]string

// TestPipeline sends 10,000 random commands on one connection through a
// go-redis pipeline and checks every reply, in order, against a model.
func TestPipeline(t *testing.T) {
	srv := start(t, server.Config{})
	rdb := newClient(t, srv.Addr, nil)
	c := ctx(t)
	rng := rand.New(rand.NewPCG(testSeed(t), 0))

	const n = 10000
	m := model{}
	pipe := rdb.Pipeline()
	cmds := make([]*redis.Cmd, 0, n)
	want := make([]string, 0, n)
	for range n {
		args, reply := m.step(rng)
		cmds = append(cmds, pipe.Do(c, args...))
		want = append(want, reply)
	}
	if _, err := pipe.Exec(c); err != nil && !isServerErr(err) {
		t.Fatal(err)
	}
	for i, cmd := range cmds {
		if got := render(cmd); got != want[i] {
			t.Fatalf("command %d %q: reply %s, want %s", i, cmd.Args(), got, want[i])
		}
	}
	for k, v := range m {
		if got, ok := srv.Store.Get([]byte(k)); !ok || string(got) != v {
			t.Fatalf("store holds %q = %q, %v; want %q", k, got, ok, v)
		}
	}
	if int(srv.Store.Len()) != len(m) {
		t.Fatalf("store has %d keys, want %d", srv.Store.Len(), len(m))
	}
}

// isServerErr reports whether err is an error reply rather than a failure
// of the connection.
func isServerErr(err error) bool {
	var re redis.Error
	return err == redis.Nil || errors.As(err, &re)
}

// render shows a go-redis reply as the model writes it.
func render(cmd *redis.Cmd) string {
	v, err := cmd.Result()
	if err == redis.Nil {
		return "nil"
	}
	if err != nil {
		return "error " + err.Error()
	}
	return renderVal(v)
}

func renderVal(v any) string {
	switch v := v.(type) {
	case nil:
		return "nil"
	case string:
		return strconv.Quote(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = renderVal(e)
		}
		return "[" + strings.Join(parts, " ") + "]"
	}
	return fmt.Sprintf("%T %v", v, v)
}

// step picks a random command, applies it to the model and returns the
// command and its expected reply.
func (m model) step(rng *rand.Rand) ([]any, string) {
	key := func() string { return "p:" + strconv.Itoa(rng.IntN(40)) }
	val := func() string {
		if rng.IntN(2) == 0 {
			return strconv.Itoa(rng.IntN(1000) - 500)
		}
		b := make([]byte, rng.IntN(20))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return "s" + string(b)
	}
	get := func(k string) string {
		if v, ok := m[k]; ok {
			return strconv.Quote(v)
		}
		return "nil"
	}
	switch op := rng.IntN(16); op {
	case 0:
		k, v := key(), val()
		m[k] = v
		return []any{"SET", k, v}, `"OK"`
	case 1:
		k := key()
		return []any{"GET", k}, get(k)
	case 2:
		k := key()
		n := int64(0)
		if v, ok := m[k]; ok {
			var err error
			if n, err = strconv.ParseInt(v, 10, 64); err != nil || strconv.FormatInt(n, 10) != v {
				return []any{"INCR", k}, "error ERR value is not an integer or out of range"
			}
		}
		n++
		m[k] = strconv.FormatInt(n, 10)
		return []any{"incr", k}, strconv.FormatInt(n, 10)
	case 3:
		k1, k2 := key(), key()
		n := 0
		for _, k := range []string{k1, k2} {
			if _, ok := m[k]; ok {
				n++
				delete(m, k)
			}
		}
		return []any{"DEL", k1, k2}, strconv.Itoa(n)
	case 4:
		k, v := key(), val()
		m[k] += v
		return []any{"APPEND", k, v}, strconv.Itoa(len(m[k]))
	case 5:
		k1, k2 := key(), key()
		n := 0
		for _, k := range []string{k1, k2, k1} {
			if _, ok := m[k]; ok {
				n++
			}
		}
		return []any{"EXISTS", k1, k2, k1}, strconv.Itoa(n)
	case 6:
		ks := []any{"MGET"}
		var parts []string
		for range 1 + rng.IntN(4) {
			k := key()
			ks = append(ks, k)
			parts = append(parts, get(k))
		}
		return ks, "[" + strings.Join(parts, " ") + "]"
	case 7:
		k := key()
		return []any{"STRLEN", k}, strconv.Itoa(len(m[k]))
	case 8:
		k, v := key(), val()
		old := get(k)
		m[k] = v
		return []any{"GETSET", k, v}, old
	case 9:
		k, v := key(), val()
		if _, ok := m[k]; ok {
			return []any{"SETNX", k, v}, "0"
		}
		m[k] = v
		return []any{"SETNX", k, v}, "1"
	case 10:
		k1, v1, k2, v2 := key(), val(), key(), val()
		m[k1], m[k2] = v1, v2
		return []any{"MSET", k1, v1, k2, v2}, `"OK"`
	case 11:
		v := val()
		return []any{"ECHO", v}, strconv.Quote(v)
	case 12:
		return []any{"NOPE", "x"}, "error ERR unknown command 'NOPE', with args beginning with: 'x' "
	case 13:
		k, v := key(), val()
		old, ok := m[k]
		if rng.IntN(2) == 0 || !ok {
			return []any{"CAS", k, "not-" + old, v}, "0"
		}
		m[k] = v
		return []any{"CAS", k, old, v}, "1"
	case 14:
		k, v := key(), val()
		_, ok := m[k]
		if rng.IntN(2) == 0 {
			if ok {
				return []any{"SET", k, v, "NX"}, "nil"
			}
			m[k] = v
			return []any{"SET", k, v, "NX"}, `"OK"`
		}
		if !ok {
			return []any{"SET", k, v, "XX", "GET"}, "nil"
		}
		old := get(k)
		m[k] = v
		return []any{"SET", k, v, "XX", "GET"}, old
	default:
		return []any{"PING"}, `"PONG"`
	}
}

// TestConcurrentClients runs 64 go-redis clients at once. Each checks that
// it reads its own writes; all increment one counter; some MSET a group of
// keys to one value while others MGET the group and check that they never
// see a mix (MSET and MGET are atomic).
func TestConcurrentClients(t *testing.T) {
	srv := start(t, server.Config{})
	// The whole run, not one wait: ctx's liveness bound is too short
	// for it under -race on a loaded machine.
	c, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const (
		clients = 64
		iters   = 60
		group   = 8
	)
	var groupKeys []string
	for i := range group {
		groupKeys = append(groupKeys, "group:"+strconv.Itoa(i))
	}
	setup := newClient(t, srv.Addr, nil)
	var kv []any
	for _, k := range groupKeys {
		kv = append(kv, k, "init")
	}
	if err := setup.MSet(c, kv...).Err(); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for w := range clients {
		rdb := newClient(t, srv.Addr, &redis.Options{PoolSize: 2})
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := worker(c, rdb, w, iters, groupKeys); err != nil {
				errs <- fmt.Errorf("client %d: %w", w, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	if n, err := setup.Get(c, "shared").Int(); err != nil || n != clients*iters {
		t.Fatalf("shared counter = %d, %v; want %d", n, err, clients*iters)
	}
	for w := range clients {
		log, ok := srv.Store.Get([]byte(fmt.Sprintf("own:%d:log", w)))
		if !ok || len(log) != iters {
			t.Fatalf("client %d's log has %d bytes, want %d", w, len(log), iters)
		}
	}
}

// worker is one client of TestConcurrentClients.
func worker(c context.Context, rdb *redis.Client, w, iters int, groupKeys []string) error {
	own := fmt.Sprintf("own:%d:", w)
	lastShared := int64(0)
	for i := range iters {
		k, v := own+strconv.Itoa(i%5), fmt.Sprintf("v-%d-%d", w, i)
		if err := rdb.Set(c, k, v, 0).Err(); err != nil {
			return err
		}
		if got, err := rdb.Get(c, k).Result(); err != nil || got != v {
			return fmt.Errorf("GET %s after SET %q = %q, %v", k, v, got, err)
		}
		if n, err := rdb.Append(c, own+"log", "x").Result(); err != nil || n != int64(i+1) {
			return fmt.Errorf("APPEND = %d, %v; want %d", n, err, i+1)
		}
		// Increments are linearizable, so one client sees them grow.
		n, err := rdb.Incr(c, "shared").Result()
		if err != nil || n <= lastShared {
			return fmt.Errorf("INCR shared = %d, %v after %d", n, err, lastShared)
		}
		lastShared = n
		if w%4 == 0 {
			var kv []any
			for _, gk := range groupKeys {
				kv = append(kv, gk, v)
			}
			if err := rdb.MSet(c, kv...).Err(); err != nil {
				return err
			}
		} else {
			vals, err := rdb.MGet(c, groupKeys...).Result()
			if err != nil {
				return err
			}
			for _, gv := range vals {
				if gv != vals[0] {
					return fmt.Errorf("MGET saw a partial MSET: %q", vals)
				}
			}
		}
		// A small pipeline of its own keys.
		pipe := rdb.Pipeline()
		set := pipe.Set(c, own+"p", v, 0)
		get := pipe.Get(c, own+"p")
		del := pipe.Del(c, own+"p")
		if _, err := pipe.Exec(c); err != nil || set.Val() != "OK" || get.Val() != v || del.Val() != 1 {
			return fmt.Errorf("pipeline SET GET DEL = %q %q %d, %v", set.Val(), get.Val(), del.Val(), err)
		}
	}
	return nil
}
