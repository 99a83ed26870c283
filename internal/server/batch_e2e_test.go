package server_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/flintkv/flint/internal/server"
	"github.com/flintkv/flint/internal/server/servertest"
	"github.com/flintkv/flint/internal/store"
)

// These tests check how a connection drives its Backend: pipelined writes
// go to Apply as one batch, replies keep the commands' order, and the read
// barrier runs once per batch of input. Each pipeline is sent with one
// write of a few kilobytes, which the server reads at once over loopback.

// recordingBackend is server.Local recording the batches and read barriers
// it serves. With fail set, Apply fails without applying anything; with
// unreported set, it reports the results of all but the batch's last entry
// and returns no error, breaking Backend's contract.
type recordingBackend struct {
	server.Local
	fail       error
	unreported bool
	barriers   atomic.Int64
	mu         sync.Mutex
	batches    []int // entries of each Apply, in order
}

func newRecordingBackend() *recordingBackend {
	return &recordingBackend{Local: server.Local{S: store.New(store.Options{})}}
}

func (b *recordingBackend) Apply(ctx context.Context, batch []byte, done func(int, store.Result)) error {
	b.mu.Lock()
	b.batches = append(b.batches, countEntries(batch))
	b.mu.Unlock()
	if b.fail != nil {
		return b.fail
	}
	if b.unreported {
		last := countEntries(batch) - 1
		return b.Local.Apply(ctx, batch, func(i int, res store.Result) {
			if i < last {
				done(i, res)
			}
		})
	}
	return b.Local.Apply(ctx, batch, done)
}

func (b *recordingBackend) ReadBarrier(ctx context.Context) error {
	b.barriers.Add(1)
	return b.Local.ReadBarrier(ctx)
}

// sizes returns the number of entries of each batch applied so far.
func (b *recordingBackend) sizes() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.batches)
}

// countEntries counts the entries of an encoded store.Batch.
func countEntries(batch []byte) int {
	n := 0
	for ; len(batch) > 0; n++ {
		l, w := binary.Uvarint(batch)
		batch = batch[w+int(l):]
	}
	return n
}

func startRecording(t *testing.T, kv *recordingBackend) *rawConn {
	t.Helper()
	srv := servertest.StartBackend(t, server.Config{}, kv)
	return dialRaw(t, srv.Addr)
}

func wantSizes(t *testing.T, kv *recordingBackend, want ...int) {
	t.Helper()
	if got := kv.sizes(); !slices.Equal(got, want) {
		t.Fatalf("Apply got batches of %v entries, want %v", got, want)
	}
}

func wantBarriers(t *testing.T, kv *recordingBackend, want int64) {
	t.Helper()
	if got := kv.barriers.Load(); got != want {
		t.Fatalf("%d read barriers, want %d", got, want)
	}
}

// sets returns a pipeline of n SETs, of k<i> to i for i from 0 to n-1.
func sets(n int) string {
	var p strings.Builder
	for i := range n {
		p.WriteString(command("SET", fmt.Sprintf("k%d", i), strconv.Itoa(i)))
	}
	return p.String()
}

func TestPipelinedWritesApplyAsOneBatch(t *testing.T) {
	kv := newRecordingBackend()
	raw := startRecording(t, kv)
	raw.send(sets(100) + command("GET", "k99"))
	for range 100 {
		raw.expect(`"OK"`)
	}
	raw.expect(`"99"`)
	wantSizes(t, kv, 100)
	wantBarriers(t, kv, 0) // the GET runs where the SETs took effect
}

// TestLongPipelineAppliesAsOneBatch sends a pipeline of SETs (about 32 KB)
// longer than a connection's first input buffer (16 KiB) a few times. The
// first is read, and applied, in parts, and the buffer grows for the next
// (see fill): a later one is read whole, and its writes wait for one commit,
// not one per part. Over loopback the server usually reads a write of this
// size at once; should it read one in parts, the next try may not.
func TestLongPipelineAppliesAsOneBatch(t *testing.T) {
	kv := newRecordingBackend()
	raw := startRecording(t, kv)
	const n = 1000
	p := sets(n)
	var got [][]int
	for range 5 {
		before := len(kv.sizes())
		raw.send(p)
		for range n {
			raw.expect(`"OK"`)
		}
		sizes := kv.sizes()[before:]
		if slices.Equal(sizes, []int{n}) {
			return
		}
		got = append(got, sizes)
	}
	t.Fatalf("a pipeline of %d SETs (%d bytes) was applied in batches of %v entries on each of %d tries, never as one batch",
		n, len(p), got, len(got))
}

// TestReadsPrefetchedAhead pipelines reads that the connection looks at
// ahead of their turn to prefetch their keys (more of them than one
// prefetch takes), among writes, commands of the wrong arity and other
// commands, and ending in a command cut short and then in a malformed one:
// every reply is as it would be without looking ahead.
func TestReadsPrefetchedAhead(t *testing.T) {
	kv := newRecordingBackend()
	raw := startRecording(t, kv)
	raw.send(sets(200))
	for range 200 {
		raw.expect(`"OK"`)
	}

	var p strings.Builder
	var want []string
	for i := range 100 {
		p.WriteString(command("GET", fmt.Sprintf("k%d", i)))
		want = append(want, strconv.Quote(strconv.Itoa(i)))
	}
	mget := []string{"MGET"}
	for i := 100; i < 200; i++ {
		mget = append(mget, fmt.Sprintf("k%d", i))
	}
	p.WriteString(command(mget...) + command("GET") + command("GET", "nosuch") +
		command("SET", "k0", "new") + command("GET", "k0") + command("PING") + command("GET", "k0"))
	want = append(want, "(array of 100)", "(error) ERR wrong number of arguments for 'get' command", "(nil)",
		`"OK"`, `"new"`, `"PONG"`, `"new"`)
	raw.send(p.String() + "*3\r\n$4\r\nMGET\r\n$2\r\nk1\r\n$2\r\nk")
	for _, w := range want {
		if w == "(array of 100)" {
			if v := raw.read(); len(v.Elems) != 100 || string(v.Elems[99].Str) != "199" {
				t.Fatalf("MGET of 100 keys = %s", v)
			}
			continue
		}
		raw.expect(w)
	}
	raw.send("2\r\n" + command("GET", "k3") + "*2\r\n$x\r\n")
	if v := raw.read(); len(v.Elems) != 2 || string(v.Elems[0].Str) != "1" || string(v.Elems[1].Str) != "2" {
		t.Fatalf("MGET k1 k2, sent in two parts = %s", v)
	}
	raw.expect(`"3"`)
	raw.expect("(error) ERR Protocol error: invalid bulk length")
	raw.expectClosed()
}

// TestWritesCommitBeforeOtherCommands checks that a command other than a
// write sees, and replies after, the writes sent before it: a simple read
// pipelined among writes joins their batch and sees exactly the writes
// before it; anything else commits the batch first.
func TestWritesCommitBeforeOtherCommands(t *testing.T) {
	kv := newRecordingBackend()
	raw := startRecording(t, kv)
	raw.send(command("SET", "a", "1") + command("GET", "a") + command("SET", "a", "2") + command("GET", "a") +
		command("INCR", "n") + command("INCR", "n") + command("PING") +
		command("SET", "s", "x") + command("INCR", "s") + command("SET", "a", "3", "GET") + command("NOSUCH"))
	for _, want := range []string{`"OK"`, `"1"`, `"OK"`, `"2"`, "1", "2", `"PONG"`,
		`"OK"`, "(error) ERR value is not an integer or out of range", `"2"`,
		"(error) ERR unknown command 'NOSUCH', with args beginning with: "} {
		raw.expect(want)
	}
	wantSizes(t, kv, 4, 3)
}

// TestRejectedWriteRepliesInOrder checks that a write command rejected for
// its arguments, which never reaches the batch, replies after the writes
// sent before it.
func TestRejectedWriteRepliesInOrder(t *testing.T) {
	kv := newRecordingBackend()
	raw := startRecording(t, kv)
	raw.send(command("SET", "a", "1") + command("SET", "a") + command("SET", "b", "2") +
		command("SET", "b", "3", "EX", "0") + command("SET", "c", "4") + command("INCRBY", "n", "x") +
		command("SET", "d", "5") + command("MSET", "k") + command("FLUSHDB", "now") + command("DEL", "a"))
	for _, want := range []string{`"OK"`, "(error) ERR wrong number of arguments for 'set' command",
		`"OK"`, "(error) ERR invalid expire time in 'set' command",
		`"OK"`, "(error) ERR value is not an integer or out of range",
		`"OK"`, "(error) ERR wrong number of arguments for 'mset' command", "(error) ERR syntax error", "1"} {
		raw.expect(want)
	}
	wantSizes(t, kv, 1, 1, 1, 1, 1)
}

// TestBatchEntryLimit checks that a pipeline longer than a batch is applied
// in batches of at most 1024 entries, all replied to in order.
func TestBatchEntryLimit(t *testing.T) {
	kv := newRecordingBackend()
	raw := startRecording(t, kv)
	const n = 1300
	// Inline commands, so that all of them fit the server's first read.
	var p strings.Builder
	for i := range n {
		fmt.Fprintf(&p, "APPEND k %d\r\n", i%10)
	}
	p.WriteString("STRLEN k\r\n")
	raw.send(p.String())
	for i := range n {
		raw.expect(strconv.Itoa(i + 1))
	}
	raw.expect(strconv.Itoa(n))
	wantSizes(t, kv, 1024, n-1024)
}

// TestDeferredReadLimit checks that reads pipelined after a write commit
// the batch once they would read more than 1024 keys, and that every reply,
// large values included, keeps the commands' order.
func TestDeferredReadLimit(t *testing.T) {
	kv := newRecordingBackend()
	raw := startRecording(t, kv)
	big := strings.Repeat("b", 4000)
	var p strings.Builder
	p.WriteString("SET k v0\r\n")
	for range 1000 {
		p.WriteString("GET k\r\n")
	}
	p.WriteString("MGET k k k k k k k k k k k k k k k k k k k k k k k k k\r\n") // 25 keys: over 1024
	p.WriteString("SET k " + big + "\r\nGET k\r\nSET k v2\r\nGET k\r\nSTRLEN k\r\n")
	raw.send(p.String())
	raw.expect(`"OK"`)
	for range 1000 {
		raw.expect(`"v0"`)
	}
	raw.expect("[" + strings.TrimSpace(strings.Repeat(`"v0" `, 25)) + "]")
	for _, want := range []string{`"OK"`, `"` + big + `"`, `"OK"`, `"v2"`, "2"} {
		raw.expect(want)
	}
	wantSizes(t, kv, 1, 2)
}

// TestApplyFailure checks that when Apply fails, every write of the batch
// replies with its error, and the commands after it still run.
func TestApplyFailure(t *testing.T) {
	kv := newRecordingBackend()
	kv.fail = errors.New("lost leadership\nretry")
	raw := startRecording(t, kv)
	raw.send(command("SET", "a", "1") + command("INCR", "b") + command("GET", "a") + command("DEL", "a") + command("PING"))
	const failed = "(error) ERR lost leadership retry"
	for _, want := range []string{failed, failed, "(nil)", failed, `"PONG"`} {
		raw.expect(want)
	}
	wantSizes(t, kv, 3)
}

// TestReadBarrierOncePerInput checks that the reads of one batch of input
// share a read barrier, and that new input needs a new one.
func TestReadBarrierOncePerInput(t *testing.T) {
	kv := newRecordingBackend()
	raw := startRecording(t, kv)
	gets := strings.Repeat(command("GET", "k"), 50)
	for i := range 2 {
		raw.send(gets)
		for range 50 {
			raw.expect("(nil)")
		}
		wantBarriers(t, kv, int64(i+1))
	}
	// No reads, no barrier.
	raw.send(command("SET", "k", "v") + command("PING") + command("SET", "k", "w"))
	raw.expect(`"OK"`)
	raw.expect(`"PONG"`)
	raw.expect(`"OK"`)
	wantBarriers(t, kv, 2)
	// A read after the connection's own write needs no second barrier.
	raw.send(command("GET", "k") + command("SET", "k", "x") + command("GET", "k") + command("EXISTS", "k"))
	raw.expect(`"w"`)
	raw.expect(`"OK"`)
	raw.expect(`"x"`)
	raw.expect("1")
	wantBarriers(t, kv, 3)
}

// TestUnreportedWrites: a backend that returns no error but leaves writes
// of the batch unreported does not crash the server; those writes are
// answered UNKNOWN, and the connection goes on.
func TestUnreportedWrites(t *testing.T) {
	kv := newRecordingBackend()
	kv.unreported = true
	raw := startRecording(t, kv)
	raw.send(command("SET", "a", "1") + command("SET", "b", "2"))
	raw.expect(`"OK"`)
	if v := raw.read(); !v.IsError() || !strings.HasPrefix(string(v.Str), "UNKNOWN ") {
		t.Fatalf("the unreported write's reply is %s, want an UNKNOWN error", v)
	}
	raw.send(command("PING"))
	raw.expect(`"PONG"`)
}
