package transporttest

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// recorder is a Handler that records the indexes of the messages it
// receives and the routes reported unreachable. Receive waits while gate
// is held.
type recorder struct {
	gate sync.RWMutex
	done chan error

	mu          sync.Mutex
	got         []raftpb.Message // received, in order
	unreachable []uint64         // nodes reported
}

func newRecorder() *recorder { return &recorder{done: make(chan error, 4)} }

func (r *recorder) Receive(from, group uint64, msgs []raftpb.Message) {
	r.gate.RLock()
	defer r.gate.RUnlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, msgs...)
}

func (r *recorder) ReceiveSnapshot(from, group uint64, m raftpb.Message, body io.Reader) error {
	b, err := io.ReadAll(body)
	if err == nil && string(b) != "snapshot" {
		err = errors.New("wrong snapshot bytes")
	}
	return err
}

func (r *recorder) Unreachable(to, group uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unreachable = append(r.unreachable, to)
}

func (r *recorder) SnapshotDone(to, group uint64, err error) { r.done <- err }

// received returns the indexes of the messages received so far, and the
// nodes reported unreachable.
func (r *recorder) received() (got, unreachable []uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.got {
		got = append(got, m.Index)
	}
	return got, slices.Clone(r.unreachable)
}

// cluster registers nodes 1 to n on net, closed when the test ends.
func cluster(t *testing.T, net *Network, n int) ([]*Endpoint, []*recorder) {
	t.Cleanup(net.Close)
	var eps []*Endpoint
	var hs []*recorder
	for i := range n {
		h := newRecorder()
		eps, hs = append(eps, net.Register(uint64(i+1), h)), append(hs, h)
	}
	return eps, hs
}

// send sends messages with indexes from to to-1 from e to node to, a few
// to a Send.
func send(e *Endpoint, to uint64, from, end uint64) {
	for i := from; i < end; i += 3 {
		var msgs []raftpb.Message
		for j := i; j < min(i+3, end); j++ {
			msgs = append(msgs, raftpb.Message{Type: raftpb.MsgApp, Index: j, Entries: []raftpb.Entry{{Data: []byte("x")}}})
		}
		e.Send(to, 1, msgs)
	}
}

// span returns from, from+1, ..., end-1.
func span(from, end uint64) []uint64 {
	var out []uint64
	for i := from; i < end; i++ {
		out = append(out, i)
	}
	return out
}

// TestInOrderWithoutFaults: messages arrive in the order sent, as copies,
// and Send does not wait for a receiver that is busy.
func TestInOrderWithoutFaults(t *testing.T) {
	checkGoroutines(t)
	net := NewNetwork(1)
	eps, hs := cluster(t, net, 2)
	hs[1].gate.Lock()
	sent := []raftpb.Message{{Index: 0, Entries: []raftpb.Entry{{Data: []byte("data")}}}}
	eps[0].Send(2, 1, sent)
	send(eps[0], 2, 1, 1000) // returns though node 2's Receive waits
	hs[1].gate.Unlock()
	net.Flush()
	if got, _ := hs[1].received(); !reflect.DeepEqual(got, span(0, 1000)) {
		t.Fatalf("received %d messages out of order or missing", len(got))
	}
	if got := hs[1].got[0].Entries[0].Data; &got[0] == &sent[0].Entries[0].Data[0] {
		t.Fatal("the receiver got the sender's memory, not a copy")
	}
}

// TestPartition: a partition stops messages across it (reported to their
// senders) and not within a side; Heal restores them; a block is one-way;
// an isolated node reaches no one.
func TestPartition(t *testing.T) {
	checkGoroutines(t)
	net := NewNetwork(1)
	eps, hs := cluster(t, net, 3)
	net.Partition([]uint64{1}, []uint64{2, 3})
	send(eps[0], 2, 0, 5)
	send(eps[1], 3, 0, 5)
	net.Flush()
	if got, unreachable := hs[1].received(); len(got) != 0 || len(unreachable) != 0 {
		t.Fatalf("across the partition node 2 received %v", got)
	}
	if _, unreachable := hs[0].received(); !reflect.DeepEqual(unreachable, []uint64{2, 2, 2, 2, 2}) {
		t.Fatalf("node 1 heard of %v unreachable, want node 2 five times", unreachable)
	}
	if got, _ := hs[2].received(); !reflect.DeepEqual(got, span(0, 5)) {
		t.Fatalf("within a side node 3 received %v", got)
	}

	net.Heal()
	send(eps[0], 2, 5, 10)
	net.Block(2, 1)
	send(eps[1], 1, 0, 3)
	send(eps[0], 2, 10, 12)
	net.Flush()
	if got, _ := hs[1].received(); !reflect.DeepEqual(got, span(5, 12)) {
		t.Fatalf("after Heal and Block(2, 1), node 2 received %v", got)
	}
	if got, _ := hs[0].received(); len(got) != 0 {
		t.Fatalf("node 1 received %v across Block(2, 1)", got)
	}

	net.Heal()
	net.Isolate(3)
	send(eps[0], 3, 0, 1)
	send(eps[2], 2, 100, 101)
	net.Flush()
	if got, _ := hs[2].received(); len(got) != 5 {
		t.Fatalf("isolated node 3 received %v", got)
	}
	if got, _ := hs[1].received(); slices.Contains(got, 100) {
		t.Fatal("node 2 received from isolated node 3")
	}
}

// TestSeededReplay: the same seed and the same sends make the same fault
// decisions; another seed makes others.
func TestSeededReplay(t *testing.T) {
	checkGoroutines(t)
	run := func(seed int64, f Faults) []uint64 {
		net := NewNetwork(seed)
		defer net.Close()
		h := newRecorder()
		a := net.Register(1, newRecorder())
		net.Register(2, h)
		net.SetFaults(f)
		send(a, 2, 0, 1000)
		net.Flush()
		got, _ := h.received()
		return got
	}
	drops := Faults{Drop: 0.3, Duplicate: 0.1}
	first := run(42, drops)
	if again := run(42, drops); !reflect.DeepEqual(first, again) {
		t.Fatal("the same seed delivered different messages, or in another order")
	}
	if other := run(43, drops); reflect.DeepEqual(first, other) {
		t.Fatal("another seed delivered the same messages")
	}
	if n := len(first); n < 600 || n > 900 {
		t.Fatalf("with 30%% drops and 10%% duplicates, %d of 1000 messages delivered", n)
	}

	// With delays, the order depends on time, but what is delivered does not.
	delays := Faults{Drop: 0.2, Duplicate: 0.1, Reorder: 0.1, MaxDelay: time.Millisecond}
	a, b := run(7, delays), run(7, delays)
	slices.Sort(a)
	slices.Sort(b)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed with delays delivered different messages")
	}
}

// TestSnapshots: a snapshot reaches its receiver and the outcome its
// sender; one across a partition fails with ErrUnreachable.
func TestSnapshots(t *testing.T) {
	checkGoroutines(t)
	net := NewNetwork(1)
	eps, hs := cluster(t, net, 2)
	body := io.NopCloser(bytes.NewReader([]byte("snapshot")))
	eps[0].SendSnapshot(2, 1, raftpb.Message{Type: raftpb.MsgSnap}, body, 8)
	if err := <-hs[0].done; err != nil {
		t.Fatal(err)
	}
	net.Partition([]uint64{1}, []uint64{2})
	eps[0].SendSnapshot(2, 1, raftpb.Message{Type: raftpb.MsgSnap}, body, 8)
	if err := <-hs[0].done; !errors.Is(err, ErrUnreachable) {
		t.Fatalf("a snapshot across a partition: %v", err)
	}
}

// TestClose: Close stops the network's goroutines, with deliveries still
// waiting; sends after it do nothing.
func TestClose(t *testing.T) {
	checkGoroutines(t)
	net := NewNetwork(1)
	eps, hs := cluster(t, net, 2)
	net.SetFaults(Faults{MinDelay: time.Hour, MaxDelay: time.Hour})
	send(eps[0], 2, 0, 10)
	net.Close()
	net.Flush()
	send(eps[0], 2, 0, 10)
	eps[0].SendSnapshot(2, 1, raftpb.Message{}, io.NopCloser(bytes.NewReader(nil)), 0)
	if got, unreachable := hs[1].received(); len(got)+len(unreachable) != 0 {
		t.Fatalf("after Close node 2 received %v", got)
	}
}

// checkGoroutines fails the test if, once it and its cleanups are done, more
// goroutines run than when it started. Call it first in a test.
func checkGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > before; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d goroutines left, %d before the test", runtime.NumGoroutine(), before)
			}
		}
	})
}
