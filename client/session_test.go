package client_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flintkv/flint/client"
	"github.com/flintkv/flint/internal/replica"
	"github.com/flintkv/flint/internal/resptest"
	"github.com/flintkv/flint/internal/server"
	"github.com/flintkv/flint/internal/server/servertest"
	"github.com/flintkv/flint/internal/vfs"
)

// startReplica serves a one-member replicated group, which has sessions,
// and returns its address.
func startReplica(t *testing.T) string {
	t.Helper()
	r, err := replica.Open(replica.Options{FS: vfs.NewMem(), Dir: "data", Logger: slog.New(slog.DiscardHandler)})
	must(t, err)
	t.Cleanup(func() { r.Close() })
	return servertest.StartBackend(t, server.Config{}, r).Addr
}

// TestSessionResendAfterCut sends INCRs through a proxy that drops the
// connection after the server ran every other one: with sessions the client
// sends each again, with the same sequence number, and each counts once.
func TestSessionResendAfterCut(t *testing.T) {
	var incrs atomic.Int64
	p := resptest.StartCutProxy(t, startReplica(t), func(req []byte) bool {
		return bytes.Contains(req, []byte("INCR")) && incrs.Add(1)%2 == 1
	})
	c, err := client.New(p.Addr, client.WithSessions(), client.WithPoolSize(1))
	must(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const calls = 10
	for i := range calls {
		n, err := c.Incr(ctx, "n")
		if err != nil || n != int64(i+1) {
			t.Fatalf("INCR %d = %d (%v), want %d", i+1, n, err, i+1)
		}
	}
	if p.Cuts() < calls/2 {
		t.Fatalf("the proxy cut %d connections, want %d: the test did not test resends", p.Cuts(), calls/2)
	}

	// Without sessions the same cut is an unknown outcome, not resent.
	plain, err := client.New(p.Addr, client.WithPoolSize(1))
	must(t, err)
	defer plain.Close()
	incrs.Store(0)
	if _, err := plain.Incr(ctx, "n"); !errors.Is(err, client.ErrUnknownOutcome) {
		t.Fatalf("INCR cut without sessions: %v, want ErrUnknownOutcome", err)
	}
}

// TestSessionConcurrentWrites runs writes from many goroutines in one
// session, singly and in batches: each lowest-unacknowledged number sent
// must be right, or the server refuses writes as acknowledged already.
func TestSessionConcurrentWrites(t *testing.T) {
	c, err := client.New(startReplica(t), client.WithSessions())
	must(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const workers, rounds = 32, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for range rounds {
				if w%4 == 0 {
					b := c.Batch()
					b.Incr("n")
					b.Get("n")
					b.Set("k", []byte("v"))
					vs, err := b.Exec(ctx)
					if err == nil && (vs[0].IsError() || vs[2].IsError()) {
						err = errors.New(string(vs[0].Str) + string(vs[2].Str))
					}
					if err != nil {
						errs <- err
						return
					}
					continue
				}
				if _, err := c.Incr(ctx, "n"); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	v, err := c.Get(ctx, "n")
	if err != nil || string(v) != strconv.Itoa(workers*rounds) {
		t.Fatalf("n = %s (%v), want %d", v, err, workers*rounds)
	}
}

// TestSessionExpired: a write answered SESSIONEXPIRED at its only send was
// not applied, so the client sends it once more in a new session; if that
// is refused too, the call fails, but not as of unknown outcome. A write
// whose first send may have applied (its connection broke) and whose
// resend is refused as expired fails with ErrUnknownOutcome. Reads go as
// they are.
func TestSessionExpired(t *testing.T) {
	var mu sync.Mutex
	var opens int
	var dropped bool
	var got []string
	expired := map[string]bool{"1": true, "3": true, "4": true} // the sessions the server forgot
	srv := resptest.Start(t, func(args []string) string {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, strings.Join(args, " "))
		switch strings.ToUpper(args[0]) {
		case "FLINT.SESSION":
			opens++
			return resptest.Int(int64(opens))
		case "FLINT.SEQ":
			if args[6] == "drop" && !dropped {
				dropped = true
				return resptest.Drop
			}
			if expired[args[1]] {
				return resptest.Err("SESSIONEXPIRED the client session expired or is unknown; open a new one with FLINT.SESSION")
			}
			return "+OK\r\n"
		case "GET":
			return resptest.Bulk("v")
		}
		return resptest.Err("ERR unknown command '" + args[0] + "'")
	})
	c, err := client.New(srv.Addr, client.WithSessions(), client.WithPoolSize(1))
	must(t, err)
	defer c.Close()
	ctx := context.Background()
	must(t, c.Set(ctx, "a", []byte("1"))) // session 1 expired, sent again in 2
	must(t, c.Set(ctx, "b", []byte("2")))
	if _, err := c.Get(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	want := []string{"CLUSTER INFO", "CLUSTER SLOTS", "FLINT.SESSION", "FLINT.SEQ 1 1 1 SET a 1", "FLINT.SESSION", "FLINT.SEQ 2 1 1 SET a 1", "FLINT.SEQ 2 2 2 SET b 2", "GET b"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("server got\n%q\nwant\n%q", got, want)
	}
	expired["2"] = true
	mu.Unlock()
	// Sessions 2 and 3 refuse it: a definite failure.
	err = c.Set(ctx, "c", []byte("3"))
	if rerr, ok := errors.AsType[*client.ReplyError](err); errors.Is(err, client.ErrUnknownOutcome) || !ok || rerr.Code() != "SESSIONEXPIRED" {
		t.Fatalf("SET refused by two sessions: %v, want SESSIONEXPIRED, not ErrUnknownOutcome", err)
	}
	// Session 4: the first send's connection breaks, the resend is refused.
	err = c.Set(ctx, "d", []byte("drop"))
	if rerr, ok := errors.AsType[*client.ReplyError](err); !errors.Is(err, client.ErrUnknownOutcome) || !ok || rerr.Code() != "SESSIONEXPIRED" {
		t.Fatalf("SET resent after a broken connection, then refused: %v, want ErrUnknownOutcome and SESSIONEXPIRED; server got %q", err, got)
	}
}

// TestSessionsUnknown: a server that does not know FLINT.SESSION gets the
// writes as they are.
func TestSessionsUnknown(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := resptest.Start(t, func(args []string) string {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, strings.Join(args, " "))
		if strings.ToUpper(args[0]) == "SET" {
			return "+OK\r\n"
		}
		return resptest.Err("ERR unknown command '" + args[0] + "', with args beginning with: ")
	})
	c, err := client.New(srv.Addr, client.WithSessions())
	must(t, err)
	defer c.Close()
	for range 2 {
		must(t, c.Set(context.Background(), "a", []byte("1")))
	}
	mu.Lock()
	defer mu.Unlock()
	if want := "CLUSTER INFO|CLUSTER SLOTS|FLINT.SESSION|SET a 1|SET a 1"; strings.Join(got, "|") != want {
		t.Fatalf("server got %q, want %q", strings.Join(got, "|"), want)
	}
}

// TestSessionResendsUnknown answers a session's first INCR with the UNKNOWN
// error a leader gives when it loses leadership before the write commits:
// the client sends it again with the same sequence number; without a
// session the reply is the caller's. The first FLINT.SESSION gets that
// error too: the INCR, not sent yet, waits for the session opened next,
// rather than failing with the UNKNOWN as if it may have taken effect.
func TestSessionResendsUnknown(t *testing.T) {
	const unknown = "UNKNOWN replica: the write may or may not have taken effect: leadership was lost"
	var seqs []string
	n, opens := 0, 0
	srv := resptest.Start(t, func(args []string) string {
		switch strings.ToUpper(args[0]) {
		case "FLINT.SESSION":
			if opens++; opens == 1 {
				return resptest.Err(unknown)
			}
			return resptest.Int(7)
		case "FLINT.SEQ":
			seqs = append(seqs, args[2])
			if len(seqs) == 1 {
				return resptest.Err(unknown)
			}
			n++
			return resptest.Int(int64(n))
		case "INCR":
			return resptest.Err(unknown)
		}
		return resptest.Err("ERR unknown command")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.New(srv.Addr, client.WithSessions())
	must(t, err)
	defer c.Close()
	if v, err := c.Incr(ctx, "n"); err != nil || v != 1 {
		t.Fatalf("INCR in a session = %d, %v; want 1", v, err)
	}
	if len(seqs) != 2 || seqs[0] != seqs[1] || opens != 2 {
		t.Fatalf("FLINT.SEQ numbers sent %v after %d FLINT.SESSIONs, want the same one twice after 2", seqs, opens)
	}
	plain, err := client.New(srv.Addr)
	must(t, err)
	defer plain.Close()
	var re *client.ReplyError
	if _, err := plain.Incr(ctx, "n"); !errors.As(err, &re) || !strings.HasPrefix(re.Msg, "UNKNOWN") {
		t.Fatalf("INCR without a session: %v, want the UNKNOWN reply", err)
	}
}

// TestSessionGivesUpUnknown drops the connection under a session's write
// and then stops the server, so that every resend fails to connect until
// the call's deadline: the call must fail with ErrUnknownOutcome, since the
// first attempt may have taken effect, and not say the write was not sent.
func TestSessionGivesUpUnknown(t *testing.T) {
	var srv *resptest.Server
	srv = resptest.Start(t, func(args []string) string {
		switch strings.ToUpper(args[0]) {
		case "FLINT.SESSION":
			return resptest.Int(7)
		case "FLINT.SEQ":
			go srv.Stop()
			return resptest.Drop
		}
		return resptest.Err("ERR unknown command")
	})
	c, err := client.New(srv.Addr, client.WithSessions(), client.WithDialTimeout(100*time.Millisecond))
	must(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = c.Incr(ctx, "n")
	if !errors.Is(err, client.ErrUnknownOutcome) || errors.Is(err, client.ErrConnect) {
		t.Fatalf("INCR = %v; want ErrUnknownOutcome, and not ErrConnect", err)
	}
}

// TestSessionExpiryWrites sends EXPIRE k 0, which removes k and replies 1
// once, through a proxy that drops the connection after the server ran
// it: with sessions the client resends it under the same number and gets
// the kept reply, 1, where running it again would reply 0.
func TestSessionExpiryWrites(t *testing.T) {
	var expires atomic.Int64
	p := resptest.StartCutProxy(t, startReplica(t), func(req []byte) bool {
		return bytes.Contains(req, []byte("EXPIRE")) && expires.Add(1) == 1
	})
	c, err := client.New(p.Addr, client.WithSessions(), client.WithPoolSize(1))
	must(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	must(t, c.Set(ctx, "k", []byte("v")))
	v, err := c.Do(ctx, "EXPIRE", "k", 0)
	if err != nil || v.Kind != client.KindInt || v.Int != 1 {
		t.Fatalf("EXPIRE k 0 resent = %v (%v), want 1", v, err)
	}
	if p.Cuts() != 1 {
		t.Fatalf("the proxy cut %d connections, want 1", p.Cuts())
	}
	if _, err := c.Get(ctx, "k"); !errors.Is(err, client.ErrNil) {
		t.Fatalf("GET k after EXPIRE k 0: %v, want ErrNil", err)
	}
}
