package client_test

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flintkv/flint/client"
	"github.com/flintkv/flint/internal/resptest"
)

// TestSessionTxResendAfterCut sends transactions (MULTI, two INCRs, EXEC,
// in a Batch) through a proxy that drops the connection after the server
// ran every other one: with sessions the client sends the batch again,
// each INCR in FLINT.SEQ with its number, and each transaction takes
// effect once.
func TestSessionTxResendAfterCut(t *testing.T) {
	p, c, ctx := startCutEveryOtherExec(t)
	const txs = 10
	for i := range txs {
		b := c.Batch()
		b.Do("MULTI")
		b.Incr("n")
		b.Do("INCRBY", "m", 10)
		b.Do("EXEC")
		vals, err := b.Exec(ctx)
		if err != nil {
			t.Fatalf("transaction %d: %v", i+1, err)
		}
		if got := vals[3].String(); got != fmt.Sprintf("[%d %d]", i+1, 10*(i+1)) {
			t.Fatalf("transaction %d: EXEC = %s", i+1, got)
		}
	}
	if p.Cuts() < txs/2 {
		t.Fatalf("the proxy cut %d connections, want %d: the test did not test resends", p.Cuts(), txs/2)
	}
}

// TestSessionTxReadResendAfterCut is TestSessionTxResendAfterCut with a
// transaction that reads the key it writes (MULTI, GET k, SET k, EXEC):
// with sessions the whole transaction is one write, so a resend is
// answered with the reply of its one application, whose GET saw the value
// before its SET, never the value its own SET wrote.
func TestSessionTxReadResendAfterCut(t *testing.T) {
	p, c, ctx := startCutEveryOtherExec(t)
	const txs = 10
	for i := range txs {
		b := c.Batch()
		b.Do("MULTI")
		b.Get("k")
		b.Set("k", fmt.Appendf(nil, "c%d", i+1))
		b.Do("EXEC")
		vals, err := b.Exec(ctx)
		if err != nil {
			t.Fatalf("transaction %d: %v", i+1, err)
		}
		want := fmt.Sprintf(`["c%d" "OK"]`, i) // the value of the transaction before
		if i == 0 {
			want = `[(nil) "OK"]`
		}
		if got := vals[3].String(); got != want {
			t.Fatalf("transaction %d: EXEC = %s, want %s", i+1, got, want)
		}
	}
	if p.Cuts() < txs/2 {
		t.Fatalf("the proxy cut %d connections, want %d: the test did not test resends", p.Cuts(), txs/2)
	}
}

// startCutEveryOtherExec starts a replica behind a proxy that cuts every
// other connection whose request holds EXEC once the server answered it,
// and returns the proxy, a client with sessions of it, and a context for
// the test's calls; all end with the test.
func startCutEveryOtherExec(t *testing.T) (*resptest.CutProxy, *client.Client, context.Context) {
	var execs atomic.Int64
	p := resptest.StartCutProxy(t, startReplica(t), func(req []byte) bool {
		return bytes.Contains(req, []byte("EXEC")) && execs.Add(1)%2 == 1
	})
	c, err := client.New(p.Addr, client.WithSessions(), client.WithPoolSize(1))
	must(t, err)
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return p, c, ctx
}
