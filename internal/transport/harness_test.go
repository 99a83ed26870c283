package transport

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// secret is the cluster secret of the tests' nodes.
var secret = []byte("0123456789abcdef0123456789abcdef")

// cluster is the tests' cluster id.
const cluster = 7

// delivery is one Receive call seen by a recorder.
type delivery struct {
	from, group uint64
	msgs        []raftpb.Message
}

// snapDone is one SnapshotDone call seen by a recorder.
type snapDone struct {
	to, group uint64
	err       error
}

// recorder is a Handler that records what it is given. Receive waits while
// gate is held; ReceiveSnapshot calls snapshot.
type recorder struct {
	gate     sync.RWMutex
	snapshot func(from, group uint64, m raftpb.Message, body io.Reader) error
	done     chan snapDone

	mu          sync.Mutex
	got         []delivery
	unreachable map[route]int
}

func newRecorder() *recorder {
	return &recorder{done: make(chan snapDone, 16), unreachable: make(map[route]int)}
}

func (r *recorder) Receive(from, group uint64, msgs []raftpb.Message) {
	r.gate.RLock()
	defer r.gate.RUnlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, delivery{from, group, msgs})
}

func (r *recorder) ReceiveSnapshot(from, group uint64, m raftpb.Message, body io.Reader) error {
	return r.snapshot(from, group, m, body)
}

func (r *recorder) Unreachable(to, group uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unreachable[route{to, group}]++
}

func (r *recorder) SnapshotDone(to, group uint64, err error) { r.done <- snapDone{to, group, err} }

// messages returns the messages received so far from node from in group,
// in order.
func (r *recorder) messages(from, group uint64) []raftpb.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []raftpb.Message
	for _, d := range r.got {
		if d.from == from && d.group == group {
			out = append(out, d.msgs...)
		}
	}
	return out
}

// unreachableCount returns how many times the route was reported.
func (r *recorder) unreachableCount(to, group uint64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unreachable[route{to, group}]
}

// logBuffer collects a transport's log for the test to search.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// has reports whether the log holds s.
func (b *logBuffer) has(s string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Contains(b.buf.String(), s)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// node is one transport under test.
type node struct {
	*Transport
	id   uint64
	addr string
	h    *recorder
	log  *logBuffer
}

// startNode starts a transport for node id on a loopback port (addr, if not
// empty), closed when the test ends. edit changes its configuration.
func startNode(t *testing.T, id uint64, addr string, edit ...func(*Config)) *node {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	n := &node{id: id, addr: l.Addr().String(), h: newRecorder(), log: &logBuffer{}}
	cfg := Config{NodeID: id, ClusterID: cluster, Secret: secret, Listener: l, Handler: n.h,
		Logger: slog.New(slog.NewTextHandler(n.log, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	for _, e := range edit {
		e(&cfg)
	}
	if n.Transport, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// connect makes each node a peer of every other and waits until all are
// connected.
func connect(t *testing.T, nodes ...*node) {
	t.Helper()
	for _, a := range nodes {
		for _, b := range nodes {
			if a != b {
				a.SetPeer(b.id, b.addr)
			}
		}
	}
	for _, a := range nodes {
		for _, b := range nodes {
			if a != b {
				waitConnected(t, a, b.id, true)
			}
		}
	}
}

// status returns n's PeerStatus of peer.
func (n *node) status(peer uint64) PeerStatus {
	for _, s := range n.Stats() {
		if s.Node == peer {
			return s
		}
	}
	return PeerStatus{}
}

// waitConnected waits until n's connection to peer is up (or down).
func waitConnected(t *testing.T, n *node, peer uint64, up bool) {
	t.Helper()
	waitFor(t, func() bool { return n.status(peer).Connected == up }, "node %d connected to %d: %v", n.id, peer, up)
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, cond func() bool, format string, args ...any) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: "+format, args...)
		}
	}
}

// checkGoroutines fails the test if, once it and its cleanups are done, more
// goroutines run than when it started. Call it first in a test.
func checkGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				t.Fatalf("%d goroutines left, %d before the test:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
			}
			time.Sleep(time.Millisecond)
		}
	})
}

// msg returns a MsgApp whose index is i and whose one entry holds data.
func msg(i uint64, data []byte) raftpb.Message {
	return raftpb.Message{Type: raftpb.MsgApp, To: 2, From: 1, Term: 3, Index: i,
		Entries: []raftpb.Entry{{Term: 3, Index: i + 1, Data: data}}}
}

// sendUntil sends m from a to node to in group every 10 ms until cond
// holds, failing the test after 10 s.
func sendUntil(t *testing.T, a *node, to, group uint64, m raftpb.Message, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("node %d's message to node %d in group %d did not arrive", a.id, to, group)
		}
		a.Send(to, group, []raftpb.Message{m})
	}
}
