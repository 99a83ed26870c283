package server_test

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flintkv/flint/internal/protocol"
	"github.com/flintkv/flint/internal/server"
)

// These tests check pipelined transactions: an EXEC joins its connection's
// batch of writes, its reply is made at its place, and the replies to the
// MULTIs and queued commands that came while the batch held writes keep
// their order.

// txPipeline is a pipeline of commands, the exact RESP2 replies they get,
// and the values their keys end with (as a model of the store applies them).
type txPipeline struct {
	cmds, replies []string
	model         map[string]string
	keys          []string // every key written, in order
}

// add appends a command (space-separated arguments) and its reply.
func (p *txPipeline) add(cmd, reply string) {
	p.cmds = append(p.cmds, command(strings.Fields(cmd)...))
	p.replies = append(p.replies, reply)
}

// set records that the pipeline leaves key at val, or without it if val
// is "".
func (p *txPipeline) set(key, val string) {
	p.keys = append(p.keys, key)
	if val == "" {
		delete(p.model, key)
	} else {
		p.model[key] = val
	}
}

func bulk(s string) string { return fmt.Sprintf("$%d\r\n%s\r\n", len(s), s) }

// block appends block i, of a kind that rng picks, on keys of its own.
// session, if not 0, is a session for FLINT.SEQ EXEC, whose transaction
// numbers *seq counts.
func (p *txPipeline) block(i int, rng *rand.Rand, session int64, seq *int64) {
	k := func(name string) string { return name + strconv.Itoa(i) }
	kinds := 8
	if session != 0 {
		kinds++
	}
	switch rng.IntN(kinds) {
	case 0: // writes and a read between transactions
		p.add("SET "+k("p")+" v", "+OK\r\n")
		p.add("INCR "+k("n"), ":1\r\n")
		p.add("GET "+k("p"), bulk("v"))
		p.set(k("p"), "v")
		p.set(k("n"), "1")
	case 1: // errors inside the transaction, and a read after it
		p.add("SET "+k("s")+" x", "+OK\r\n")
		p.add("MULTI", "+OK\r\n")
		p.add("SET "+k("a")+" 1", "+QUEUED\r\n")
		p.add("INCR "+k("a"), "+QUEUED\r\n")
		p.add("SET "+k("a")+" 1 NX XX", "+QUEUED\r\n")
		p.add("INCR "+k("s"), "+QUEUED\r\n")
		p.add("GET "+k("a"), "+QUEUED\r\n")
		p.add("EXEC", "*5\r\n+OK\r\n:2\r\n-ERR syntax error\r\n-ERR value is not an integer or out of range\r\n"+bulk("2"))
		p.add("GET "+k("a"), bulk("2"))
		p.set(k("a"), "2")
		p.set(k("s"), "x")
	case 2: // the connection's own write after WATCH aborts it
		p.add("SET "+k("w")+" 1", "+OK\r\n")
		p.add("WATCH "+k("w"), "+OK\r\n")
		p.add("SET "+k("w")+" 2", "+OK\r\n")
		p.add("MULTI", "+OK\r\n")
		p.add("SET "+k("b")+" 1", "+QUEUED\r\n")
		p.add("EXEC", "*-1\r\n")
		p.add("EXISTS "+k("b"), ":0\r\n")
		p.set(k("w"), "2")
	case 3: // a watched key left alone
		p.add("SET "+k("c")+" 0", "+OK\r\n")
		p.add("WATCH "+k("c"), "+OK\r\n")
		p.add("MULTI", "+OK\r\n")
		p.add("INCRBY "+k("c")+" 5", "+QUEUED\r\n")
		p.add("EXEC", "*1\r\n:5\r\n")
		p.set(k("c"), "5")
	case 4: // a queue-time error discards it
		p.add("MULTI", "+OK\r\n")
		p.add("SET "+k("q")+" 1", "+QUEUED\r\n")
		p.add("GET", "-ERR wrong number of arguments for 'get' command\r\n")
		p.add("EXEC", "-EXECABORT Transaction discarded because of previous errors.\r\n")
		p.add("SET "+k("q")+" 2", "+OK\r\n")
		p.set(k("q"), "2")
	case 5: // DISCARD, and an empty transaction
		p.add("SET "+k("d")+" 1", "+OK\r\n")
		p.add("MULTI", "+OK\r\n")
		p.add("DEL "+k("d"), "+QUEUED\r\n")
		p.add("DISCARD", "+OK\r\n")
		p.add("MULTI", "+OK\r\n")
		p.add("EXEC", "*0\r\n")
		p.set(k("d"), "1")
	case 6: // a command that runs as EXEC builds the entry sees the writes before it
		p.add("SET "+k("e")+" 1", "+OK\r\n")
		p.set(k("e"), "1")
		p.add("MULTI", "+OK\r\n")
		p.add("DBSIZE", "+QUEUED\r\n")
		p.add("DEL "+k("e"), "+QUEUED\r\n")
		p.add("EXEC", fmt.Sprintf("*2\r\n:%d\r\n:1\r\n", len(p.model)))
		p.set(k("e"), "")
	case 7: // transactions back to back, with reads of values at their place
		p.add("MULTI", "+OK\r\n")
		p.add("SET "+k("r")+" hello", "+QUEUED\r\n")
		p.add("EXEC", "*1\r\n+OK\r\n")
		p.add("MULTI", "+OK\r\n")
		p.add("APPEND "+k("r")+" !", "+QUEUED\r\n")
		p.add("GETRANGE "+k("r")+" 4 -1", "+QUEUED\r\n")
		p.add("TTL "+k("r"), "+QUEUED\r\n")
		p.add("MEMORY USAGE "+k("r"), "+QUEUED\r\n")
		p.add("EXEC", fmt.Sprintf("*4\r\n:6\r\n%s:-1\r\n:%d\r\n", bulk("o!"), len(k("r"))+6+48))
		p.set(k("r"), "hello!")
	case 8: // a session's transaction, and its resend, which applies nothing
		*seq++
		exec := fmt.Sprintf("FLINT.SEQ %d %d %d EXEC", session, *seq, *seq)
		for _, v := range []string{"first", "resent"} {
			p.add("MULTI", "+OK\r\n")
			p.add("SET "+k("z")+" "+v, "+QUEUED\r\n")
			p.add("GET "+k("z"), "+QUEUED\r\n")
			p.add(exec, "*2\r\n+OK\r\n"+bulk("first"))
		}
		p.set(k("z"), "first")
	}
}

// run sends the pipeline in parts of up to 64 commands, each in one
// write, and checks every reply, then the final value of every key.
func (p *txPipeline) run(t *testing.T, raw *rawConn, rng *rand.Rand) {
	t.Helper()
	for i := 0; i < len(p.cmds); {
		j := min(len(p.cmds), i+1+rng.IntN(64))
		raw.send(strings.Join(p.cmds[i:j], ""))
		for ; i < j; i++ {
			raw.SetReadDeadline(time.Now().Add(liveness))
			got := make([]byte, len(p.replies[i]))
			if _, err := io.ReadFull(raw.br, got); err != nil || string(got) != p.replies[i] {
				t.Fatalf("command %d, %q: got %q (%v), want %q", i, trim(p.cmds[i]), got, err, p.replies[i])
			}
		}
	}
	for _, key := range slices.Compact(slices.Sorted(slices.Values(p.keys))) {
		want := "(nil)"
		if v, ok := p.model[key]; ok {
			want = strconv.Quote(v)
		}
		raw.send(command("GET", key))
		raw.expect(want)
	}
}

// TestPipelinedTxs pipelines many transactions on one connection, with
// runtime errors, WATCH aborts, queue-time errors, DISCARD and other
// commands among them, in parts of random sizes, against a single node and
// a replica (with session transactions), and checks every reply and the
// final state.
func TestPipelinedTxs(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	for _, backend := range []string{"local", "replica"} {
		t.Run(backend, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 0))
			var raw *rawConn
			var session int64
			if backend == "local" {
				raw = dialRaw(t, start(t, server.Config{}).Addr)
			} else {
				raw = dialRaw(t, startReplicaServer(t).Addr)
				if v := raw.do("FLINT.SESSION"); v.Kind != protocol.KindInt {
					t.Fatalf("FLINT.SESSION: %s", v)
				} else {
					session = v.Int
				}
			}
			p := txPipeline{model: map[string]string{}}
			var seq int64
			for i := range 300 {
				p.block(i, rng, session, &seq)
			}
			p.run(t, raw, rng)
		})
	}
}

// TestPipelinedTxsApplyAsOneBatch checks that pipelined transactions and
// the writes between them are applied in one batch: one commit, not one
// per EXEC.
func TestPipelinedTxsApplyAsOneBatch(t *testing.T) {
	kv := newRecordingBackend()
	raw := startRecording(t, kv)
	var p strings.Builder
	const n = 50
	for i := range n {
		k := strconv.Itoa(i)
		p.WriteString(command("SET", "k"+k, k) + command("MULTI") + command("SET", "a"+k, k) +
			command("INCR", "a"+k) + command("EXEC"))
	}
	p.WriteString(command("GET", "a0"))
	raw.send(p.String())
	for i := range n {
		raw.expectBytes(fmt.Sprintf("+OK\r\n+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n+OK\r\n:%d\r\n", i+1))
	}
	raw.expectBytes(bulk("1"))
	wantSizes(t, kv, 2*n)
}

// TestPipelinedTxsApplyFailure checks that when Apply fails, each EXEC of
// the batch replies with the error, as each write does, after the replies
// to its MULTI and queued commands.
func TestPipelinedTxsApplyFailure(t *testing.T) {
	kv := newRecordingBackend()
	kv.fail = errors.New("lost leadership")
	raw := startRecording(t, kv)
	raw.send(command("SET", "a", "1") + command("MULTI") + command("SET", "b", "1") + command("EXEC") +
		command("MULTI") + command("INCR", "c") + command("EXEC") + command("PING"))
	const failed = "-ERR lost leadership\r\n"
	raw.expectBytes(failed + "+OK\r\n+QUEUED\r\n" + failed + "+OK\r\n+QUEUED\r\n" + failed + "+PONG\r\n")
	wantSizes(t, kv, 3)
}
