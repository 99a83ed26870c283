package server_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flintkv/flint/internal/server"
)

// txStep is a command sent and the exact bytes of its reply.
type txStep struct{ cmd, reply string }

// runSteps sends each command (space-separated arguments) and checks its
// reply's bytes.
func runSteps(t *testing.T, raw *rawConn, steps []txStep) {
	t.Helper()
	for _, st := range steps {
		raw.send(command(strings.Fields(st.cmd)...))
		raw.expectBytes(st.reply)
	}
}

// TestTxReplies checks MULTI, EXEC, DISCARD, WATCH and UNWATCH byte for
// byte, as redis-server 7 replies, in RESP2 and RESP3.
func TestTxReplies(t *testing.T) {
	steps := []txStep{
		{"EXEC", "-ERR EXEC without MULTI\r\n"},
		{"DISCARD", "-ERR DISCARD without MULTI\r\n"},
		{"SET s abc", "+OK\r\n"},
		{"MULTI", "+OK\r\n"},
		{"MULTI", "-ERR MULTI calls can not be nested\r\n"},
		{"WATCH s", "-ERR WATCH inside MULTI is not allowed\r\n"},
		{"SET a 1", "+QUEUED\r\n"},
		{"INCR a", "+QUEUED\r\n"},
		{"GET a", "+QUEUED\r\n"},
		{"INCR s", "+QUEUED\r\n"},
		{"SET a 1 NX XX", "+QUEUED\r\n"},
		{"MGET a nosuch", "+QUEUED\r\n"},
		{"DEL a", "+QUEUED\r\n"},
		{"PING", "+QUEUED\r\n"},
		{"EXISTS a s", "+QUEUED\r\n"},
		{"CLIENT GETNAME", "+QUEUED\r\n"},
		// Nested MULTI and WATCH inside MULTI do not discard it.
		{"EXEC", "*10\r\n+OK\r\n:2\r\n$1\r\n2\r\n-ERR value is not an integer or out of range\r\n-ERR syntax error\r\n" +
			"*2\r\n$1\r\n2\r\n$-1\r\n:1\r\n+PONG\r\n:1\r\n$-1\r\n"},
		{"EXEC", "-ERR EXEC without MULTI\r\n"},
		{"MULTI", "+OK\r\n"},
		{"EXEC", "*0\r\n"},
		// Queue-time errors: the transaction is discarded at EXEC.
		{"MULTI", "+OK\r\n"},
		{"SET b 1", "+QUEUED\r\n"},
		{"NOSUCH x", "-ERR unknown command 'NOSUCH', with args beginning with: 'x' \r\n"},
		{"GET", "-ERR wrong number of arguments for 'get' command\r\n"},
		{"SAVE", "-ERR Command not allowed inside a transaction\r\n"},
		{"EXEC", "-EXECABORT Transaction discarded because of previous errors.\r\n"},
		{"EXISTS b", ":0\r\n"},
		{"MULTI", "+OK\r\n"},
		{"SET b 1", "+QUEUED\r\n"},
		{"DISCARD", "+OK\r\n"},
		{"EXISTS b", ":0\r\n"},
		// WATCH: a write by another client is simulated below; here, the
		// connection's own write after WATCH aborts too.
		{"WATCH s", "+OK\r\n"},
		{"SET s abc", "+OK\r\n"},
		{"MULTI", "+OK\r\n"},
		{"SET b 1", "+QUEUED\r\n"},
		{"EXEC", "*-1\r\n"},
		{"EXISTS b", ":0\r\n"},
		{"WATCH s", "+OK\r\n"},
		{"UNWATCH", "+OK\r\n"},
		{"SET s abc", "+OK\r\n"},
		{"MULTI", "+OK\r\n"},
		{"SET b 1", "+QUEUED\r\n"},
		{"EXEC", "*1\r\n+OK\r\n"},
		// EXEC forgets the watched keys, even when it aborts.
		{"WATCH b", "+OK\r\n"},
		{"DEL b", ":1\r\n"},
		{"MULTI", "+OK\r\n"},
		{"EXEC", "*-1\r\n"},
		{"DEL s", ":1\r\n"},
		{"MULTI", "+OK\r\n"},
		{"EXEC", "*0\r\n"},
	}
	for _, proto := range []string{"2", "3"} {
		t.Run("RESP"+proto, func(t *testing.T) {
			srv := start(t, server.Config{})
			raw := dialRaw(t, srv.Addr)
			raw.do("HELLO", proto)
			for _, st := range steps {
				if proto == "3" {
					st.reply = strings.ReplaceAll(st.reply, "*-1\r\n", "_\r\n")
					st.reply = strings.ReplaceAll(st.reply, "$-1\r\n", "_\r\n")
				}
				runSteps(t, raw, []txStep{st})
			}
		})
	}
}

// TestTxValueReads checks the reads of values that are not simple reads
// (GETRANGE, LCS, the bit reads) inside a transaction: they see the writes
// before them in it, and their argument errors come in EXEC's array.
func TestTxValueReads(t *testing.T) {
	srv := start(t, server.Config{})
	raw := dialRaw(t, srv.Addr)
	runSteps(t, raw, []txStep{
		{"SET a hello", "+OK\r\n"},
		{"MULTI", "+OK\r\n"},
		{"SETRANGE a 0 J", "+QUEUED\r\n"},
		{"GETRANGE a 0 1", "+QUEUED\r\n"},
		{"GETRANGE a x 1", "+QUEUED\r\n"},
		{"SET b jello", "+QUEUED\r\n"},
		{"LCS a b", "+QUEUED\r\n"},
		{"GETBIT a 1", "+QUEUED\r\n"},
		{"BITFIELD a GET u8 0", "+QUEUED\r\n"},
		{"BITCOUNT nosuch", "+QUEUED\r\n"},
		{"EXEC", "*8\r\n:5\r\n$2\r\nJe\r\n-ERR value is not an integer or out of range\r\n+OK\r\n$4\r\nello\r\n:1\r\n*1\r\n:74\r\n:0\r\n"},
		{"MULTI", "+OK\r\n"},
		{"RANGE a z", "-ERR 'range' cannot be queued in a transaction: it could not see the transaction's writes\r\n"},
		{"EXEC", "-EXECABORT Transaction discarded because of previous errors.\r\n"},
	})
}

// TestTxWatchOtherClient checks that a write by another connection between
// WATCH and EXEC aborts the transaction, including one that writes the
// same value, a DEL and a FLUSHALL, and that reads do not.
func TestTxWatchOtherClient(t *testing.T) {
	srv := start(t, server.Config{})
	a, b := dialRaw(t, srv.Addr), dialRaw(t, srv.Addr)
	for _, tc := range []struct {
		other   string
		aborted bool
	}{
		{"GET k", false},
		{"SET k v", true},
		{"DEL k", true},
		{"SET k v NX", true}, // k was deleted: NX sets it
		{"SET k v NX", false},
		{"FLUSHALL", true},
		{"SET other 1", false},
	} {
		runSteps(t, a, []txStep{{"WATCH k", "+OK\r\n"}})
		b.send(command(strings.Fields(tc.other)...))
		b.read()
		want := "*1\r\n+OK\r\n"
		if tc.aborted {
			want = "*-1\r\n"
		}
		runSteps(t, a, []txStep{{"MULTI", "+OK\r\n"}, {"SET k v", "+QUEUED\r\n"}, {"EXEC", want}})
	}
}

// TestTxPipelined sends a transaction in one write, between other
// commands, as clients pipeline them.
func TestTxPipelined(t *testing.T) {
	srv := start(t, server.Config{})
	raw := dialRaw(t, srv.Addr)
	raw.send(command("SET", "x", "1") + command("MULTI") + command("INCR", "x") + command("GET", "x") +
		command("EXEC") + command("GET", "x"))
	raw.expectBytes("+OK\r\n+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n:2\r\n$1\r\n2\r\n$1\r\n2\r\n")
}

// TestTxLimits checks that a transaction past the queue's bounds is
// refused and discarded, and that the connection goes on.
func TestTxLimits(t *testing.T) {
	srv := start(t, server.Config{})
	raw := dialRaw(t, srv.Addr)
	raw.do("MULTI")
	big := strings.Repeat("x", 1<<20)
	var pipeline strings.Builder
	for range 63 {
		pipeline.WriteString(command("SET", "k", big))
	}
	raw.send(pipeline.String())
	for i := range 63 {
		if v := raw.read().String(); v != `"QUEUED"` {
			t.Fatalf("SET %d: %s", i, v)
		}
	}
	raw.send(command("SET", "k", big))
	if v := raw.read().String(); !strings.HasPrefix(v, "(error) ERR transaction too large") {
		t.Fatalf("past the bound: %s", v)
	}
	raw.send(command("EXEC"))
	raw.expectBytes("-EXECABORT Transaction discarded because of previous errors.\r\n")
	runSteps(t, raw, []txStep{{"EXISTS k", ":0\r\n"}})
}

// TestGoRedisTx uses go-redis' TxPipelined and Watch: concurrent clients
// increment a counter optimistically, retrying when EXEC aborts; the
// final count is exact.
func TestGoRedisTx(t *testing.T) {
	srv := start(t, server.Config{})
	c := newClient(t, srv.Addr, nil)
	cx := ctx(t)
	cmds, err := c.TxPipelined(cx, func(p redis.Pipeliner) error {
		p.Set(cx, "a", "1", 0)
		p.Incr(cx, "a")
		p.Get(cx, "a")
		return nil
	})
	if err != nil || len(cmds) != 3 || cmds[2].(*redis.StringCmd).Val() != "2" {
		t.Fatalf("TxPipelined: %v %v", cmds, err)
	}
	const clients, incrs = 8, 50
	var wg sync.WaitGroup
	for g := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newClient(t, srv.Addr, nil)
			for range incrs {
				if err := increment(cx, c, "counter"); err != nil {
					t.Errorf("client %d: %v", g, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n, err := c.Get(cx, "counter").Int(); err != nil || n != clients*incrs {
		t.Fatalf("counter = %d, %v; want %d", n, err, clients*incrs)
	}
}

// increment adds one to key with WATCH, GET and MULTI/EXEC, retrying
// while another client's write aborts it, at most 10,000 times.
func increment(cx context.Context, c *redis.Client, key string) error {
	for range 10_000 {
		err := c.Watch(cx, func(tx *redis.Tx) error {
			n, err := tx.Get(cx, key).Int()
			if err != nil && !errors.Is(err, redis.Nil) {
				return err
			}
			_, err = tx.TxPipelined(cx, func(p redis.Pipeliner) error {
				p.Set(cx, key, strconv.Itoa(n+1), 0)
				return nil
			})
			return err
		}, key)
		if !errors.Is(err, redis.TxFailedErr) {
			return err
		}
	}
	return fmt.Errorf("%s: 10,000 transactions aborted in a row", key)
}
