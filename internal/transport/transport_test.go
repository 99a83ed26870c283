package transport

import (
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// TestRoundTrip: three transports send each other messages of two groups;
// every message arrives whole, from the right node, in the right group.
func TestRoundTrip(t *testing.T) {
	checkGoroutines(t)
	nodes := []*node{startNode(t, 1, ""), startNode(t, 2, ""), startNode(t, 3, "")}
	connect(t, nodes...)
	for _, a := range nodes {
		for _, b := range nodes {
			for group := uint64(1); group <= 2 && a != b; group++ {
				a.Send(b.id, group, []raftpb.Message{msg(group, fmt.Appendf(nil, "%d to %d", a.id, b.id)), msg(10, nil)})
			}
		}
	}
	for _, b := range nodes {
		for _, a := range nodes {
			for group := uint64(1); group <= 2 && a != b; group++ {
				want := []raftpb.Message{msg(group, fmt.Appendf(nil, "%d to %d", a.id, b.id)), msg(10, nil)}
				waitFor(t, func() bool { return len(b.h.messages(a.id, group)) == 2 }, "2 messages of group %d from %d at %d", group, a.id, b.id)
				if got := b.h.messages(a.id, group); !reflect.DeepEqual(got, want) {
					t.Errorf("node %d got from %d in group %d:\n%v\nwant\n%v", b.id, a.id, group, got, want)
				}
			}
		}
	}
	if s := nodes[0].status(2); !s.Connected || s.Sent != 4 || s.Dropped != 0 || s.Addr != nodes[1].addr {
		t.Errorf("node 1's status of node 2: %+v", s)
	}
}

// TestLearnsCallersAddress: a node that knows no address for a peer learns
// the one the peer's hello gives once the peer is authenticated, so it can
// answer; one that knows an address keeps it.
func TestLearnsCallersAddress(t *testing.T) {
	checkGoroutines(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	advertised := l.Addr().String()
	l.Close()
	a := startNode(t, 1, advertised, func(c *Config) { c.Advertise = advertised })
	b := startNode(t, 2, "")
	a.SetPeer(2, b.addr)
	sendUntil(t, a, 2, 1, msg(1, []byte("hello")), func() bool { return len(b.h.messages(1, 1)) > 0 })
	waitConnected(t, b, 1, true)
	if s := b.status(1); s.Addr != advertised {
		t.Errorf("node 2's address of node 1 is %q, want the advertised %q", s.Addr, advertised)
	}
	sendUntil(t, b, 1, 1, msg(2, []byte("answer")), func() bool { return len(a.h.messages(2, 1)) > 0 })

	b.SetPeer(1, "127.0.0.1:1") // set explicitly: a hello does not override it
	a.RemovePeer(2)
	a.SetPeer(2, b.addr)
	sendUntil(t, a, 2, 1, msg(3, nil), func() bool { return len(b.h.messages(1, 1)) > 1 })
	if s := b.status(1); s.Addr != "127.0.0.1:1" {
		t.Errorf("node 2's address of node 1 is %q after SetPeer, want 127.0.0.1:1", s.Addr)
	}
}

// TestOrderAndBatching: without faults, the messages from one node to another
// arrive in the order sent, none missing, and writes batch them.
func TestOrderAndBatching(t *testing.T) {
	checkGoroutines(t)
	big := func(c *Config) { c.QueueMessages = 1 << 20 }
	a, b := startNode(t, 1, "", big), startNode(t, 2, "", big)
	connect(t, a, b)
	const n = 5000
	for i := uint64(0); i < n; {
		batch := []raftpb.Message{msg(i, []byte("x"))}
		if i%3 == 0 && i+1 < n {
			batch = append(batch, msg(i+1, []byte("y")))
		}
		a.Send(2, 9, batch)
		i += uint64(len(batch))
	}
	waitFor(t, func() bool { return len(b.h.messages(1, 9)) >= n }, "%d messages", n)
	for i, m := range b.h.messages(1, 9) {
		if m.Index != uint64(i) {
			t.Fatalf("message %d has index %d", i, m.Index)
		}
	}
	if s := a.status(2); s.Sent != n || s.Dropped != 0 || s.Writes >= s.Sent {
		t.Fatalf("status %+v: want %d sent in fewer writes, none dropped", s, n)
	}
}

// TestReconnect: when a peer's transport stops, messages for it are dropped
// and reported unreachable; once it restarts on the same address, the
// sender reconnects and messages flow again.
func TestReconnect(t *testing.T) {
	checkGoroutines(t)
	a, b := startNode(t, 1, ""), startNode(t, 2, "")
	connect(t, a, b)
	a.Send(2, 1, []raftpb.Message{msg(1, nil)})
	waitFor(t, func() bool { return len(b.h.messages(1, 1)) == 1 }, "the first message")

	b.Close()
	waitConnected(t, a, 2, false)
	a.Send(2, 1, []raftpb.Message{msg(2, nil)})
	waitFor(t, func() bool { return a.h.unreachableCount(2, 1) > 0 }, "node 2 reported unreachable")
	if s := a.status(2); s.Dropped != 1 {
		t.Fatalf("status while node 2 is down: %+v, want 1 dropped", s)
	}

	b2 := startNode(t, 2, b.addr)
	waitConnected(t, a, 2, true)
	a.Send(2, 1, []raftpb.Message{msg(3, nil)})
	waitFor(t, func() bool { return len(b2.h.messages(1, 1)) == 1 }, "a message after the restart")
	if got := b2.h.messages(1, 1)[0].Index; got != 3 {
		t.Fatalf("after the restart node 2 got index %d, want 3", got)
	}
}

// TestQueueFullDrops: a peer that stops reading fills the connection and
// then the queue; Send still returns at once, drops, and reports the route
// unreachable. Once the peer reads again, messages flow.
func TestQueueFullDrops(t *testing.T) {
	checkGoroutines(t)
	a := startNode(t, 1, "", func(c *Config) { c.QueueMessages = 4 })
	b := startNode(t, 2, "")
	connect(t, a, b)
	b.h.gate.Lock() // node 2's Receive waits: its connection backs up
	data := make([]byte, 1<<20)
	for i := 0; a.status(2).Dropped == 0; i++ {
		if i == 1000 {
			b.h.gate.Unlock()
			t.Fatal("1000 messages of 1 MiB sent to a peer not reading, none dropped")
		}
		a.Send(2, 5, []raftpb.Message{msg(uint64(i), data)})
	}
	waitFor(t, func() bool { return a.h.unreachableCount(2, 5) > 0 }, "node 2 reported unreachable in group 5")
	b.h.gate.Unlock()
	sendUntil(t, a, 2, 6, msg(0, nil), func() bool { return len(b.h.messages(1, 6)) > 0 })
}

// TestSetPeerMoves: a peer whose address changes is reached at the new one;
// a removed peer is no longer sent to.
func TestSetPeerMoves(t *testing.T) {
	checkGoroutines(t)
	a, b := startNode(t, 1, ""), startNode(t, 2, "")
	connect(t, a, b)
	b.Close()
	b2 := startNode(t, 2, "")
	a.SetPeer(2, b2.addr)
	waitConnected(t, a, 2, true)
	a.Send(2, 1, []raftpb.Message{msg(1, nil)})
	waitFor(t, func() bool { return len(b2.h.messages(1, 1)) == 1 }, "a message at the new address")

	a.RemovePeer(2)
	if s := a.Stats(); len(s) != 0 {
		t.Fatalf("stats after RemovePeer: %+v", s)
	}
	a.Send(2, 1, []raftpb.Message{msg(2, nil)})
	waitFor(t, func() bool { return a.h.unreachableCount(2, 1) == 1 }, "a removed peer reported unreachable")
}

// TestCloseStopsEverything: Close ends every goroutine, also with a
// snapshot stream in progress (which fails at both ends), and what is sent
// after Close is dropped.
func TestCloseStopsEverything(t *testing.T) {
	checkGoroutines(t)
	a, b := startNode(t, 1, ""), startNode(t, 2, "")
	connect(t, a, b)
	reading, received := make(chan struct{}), make(chan error, 1)
	b.h.snapshot = func(from, group uint64, m raftpb.Message, body io.Reader) error {
		close(reading)
		_, err := io.Copy(io.Discard, body)
		received <- err
		return err
	}
	endless := io.NopCloser(io.LimitReader(zeros{}, 1<<40))
	a.SendSnapshot(2, 1, raftpb.Message{Type: raftpb.MsgSnap}, endless, 1<<40)
	<-reading
	if err := a.Close(); err != nil || a.Close() != nil {
		t.Fatal("Close failed, or failed the second time")
	}
	if d := <-a.h.done; d.err == nil || d.to != 2 || d.group != 1 {
		t.Fatalf("SnapshotDone after the sender closed: %+v", d)
	}
	if err := <-received; err == nil {
		t.Fatal("the receiver read a snapshot cut short to its end")
	}
	a.Send(2, 1, []raftpb.Message{msg(1, nil)})
	closed := &closeRecorder{}
	a.SendSnapshot(2, 1, raftpb.Message{}, closed, 0)
	if !closed.closed {
		t.Fatal("SendSnapshot after Close did not close the body")
	}
	if n := a.h.unreachableCount(2, 1); n != 0 {
		t.Fatalf("Send after Close reported %d drops", n)
	}
}

// zeros reads as endless zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// closeRecorder is an empty body that records being closed.
type closeRecorder struct{ closed bool }

func (c *closeRecorder) Read([]byte) (int, error) { return 0, io.EOF }
func (c *closeRecorder) Close() error             { c.closed = true; return nil }

// TestConfigRefused: New refuses a configuration it cannot run.
func TestConfigRefused(t *testing.T) {
	for name, c := range map[string]Config{
		"no node id":  {Secret: secret, Handler: newRecorder()},
		"no secret":   {NodeID: 1, Handler: newRecorder()},
		"no listener": {NodeID: 1, Secret: secret, Handler: newRecorder()},
	} {
		if _, err := New(c); !errors.Is(err, ErrConfig) || !strings.HasPrefix(err.Error(), "transport: ") {
			t.Errorf("%s: New returned %v", name, err)
		}
	}
}
