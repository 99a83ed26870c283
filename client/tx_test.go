package client_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
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
	runIncrTxs(t, ctx, c, txs)
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

// runIncrTxs runs n transactions in turn, each MULTI, INCR n, INCRBY m
// 10, EXEC in a Batch, on keys no other client writes, and checks that
// each applied once, whole.
func runIncrTxs(t *testing.T, ctx context.Context, c *client.Client, n int) {
	t.Helper()
	for i := range n {
		b := c.Batch()
		b.Do("MULTI")
		b.Incr("n")
		b.Do("INCRBY", "m", 10)
		b.Do("EXEC")
		vals, err := b.Exec(ctx)
		if err != nil {
			t.Fatalf("transaction %d: %v", i+1, err)
		}
		if got, want := fmt.Sprint(vals), fmt.Sprintf(`["OK" "QUEUED" "QUEUED" [%d %d]]`, i+1, 10*(i+1)); got != want {
			t.Fatalf("transaction %d: replies %s, want %s", i+1, got, want)
		}
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

// txFollower answers as a follower of a replicated group does: MULTI is
// OK, a command with a key is MOVED to leader (which marks the
// transaction), and EXEC, in FLINT.SEQ or not, is then refused. CLUSTER is
// unknown, so the client keeps its map of one member. FLINT.SESSION it
// sends on to the leader, as a member that led when the session was
// opened did.
func txFollower(t *testing.T, n *counts, leader string) resptest.Handler {
	return func(args []string) string {
		n.add(args)
		switch name := strings.ToUpper(args[0]); {
		case name == "FLINT.SESSION":
			return openAt(t, leader)
		case name == "CLUSTER":
			return resptest.Err("ERR unknown command 'CLUSTER'")
		case name == "MULTI":
			return "+OK\r\n"
		case name == "EXEC" || name == "FLINT.SEQ" && strings.EqualFold(args[len(args)-1], "EXEC"):
			return resptest.Err("EXECABORT Transaction discarded because of previous errors.")
		}
		return resptest.Moved(866, leader)
	}
}

// TestTxMovedWhole sends transactions to a follower, which answers MULTI
// and turns the queued commands away with MOVED: the client sends the
// whole transaction again to the leader, MULTI to EXEC, so it applies
// there as one, in its session if the client has sessions. Sending the
// refused commands on alone would apply them outside the transaction, and
// outside the session: a transaction that an earlier attempt applied
// would then apply again.
func TestTxMovedWhole(t *testing.T) {
	for _, sessions := range []bool{false, true} {
		t.Run(fmt.Sprintf("sessions=%v", sessions), func(t *testing.T) {
			var n counts
			leader := startReplica(t)
			fol := resptest.Start(t, txFollower(t, &n, leader))
			opts := []client.Option{}
			if sessions {
				opts = append(opts, client.WithSessions())
			}
			c := newClient(t, fol.Addr, opts...)
			ctx := ctxT(t)
			runIncrTxs(t, ctx, c, 3)
			if n.get("MULTI") != 1 {
				t.Fatalf("the follower got %d MULTIs, want 1 (the leader takes the rest)", n.get("MULTI"))
			}
		})
	}
}

// openAt opens a session at the server at addr and returns its reply.
func openAt(t *testing.T, addr string) string {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Error(err)
		return resptest.Err("ERR " + err.Error())
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write([]byte("*1\r\n$13\r\nFLINT.SESSION\r\n")); err != nil {
		return resptest.Err("ERR " + err.Error())
	}
	line, err := bufio.NewReader(nc).ReadString('\n')
	if err != nil {
		return resptest.Err("ERR " + err.Error())
	}
	return line
}
