// Package transporttest is an in-memory network for tests of code that
// sends raft messages through a transport.Sender: each node's Endpoint
// implements Sender, and delivers to the transport.Handler registered for
// the node it sends to, with faults drawn from a seeded random source.
//
// # Determinism
//
// The fault decisions are deterministic: every message sent draws exactly
// four numbers (drop, duplicate, reorder, delay) and every snapshot one
// (drop), in the order of the Send and SendSnapshot calls, whatever the
// faults configured, so that the same seed, the same calls in the same
// order and the same changes of faults and partitions between them make
// the same decisions. What is not deterministic is time and goroutine
// scheduling: the order of calls made from several goroutines, when a
// delayed message falls due (its delay counts from the real time of its
// Send), and how handler calls of different nodes interleave. Without
// delays and reordering, the messages from one node to another arrive in
// the order sent (duplicates right after their original).
//
// # Delivery
//
// Send never blocks. Each node has one goroutine that makes all its
// handler calls but SnapshotDone, one at a time: Receive with one message
// each (a copy: handlers never share memory with senders or each other),
// and Unreachable. A message is reported Unreachable to its sender when it
// is sent across a partition or to a node not registered, or when its
// receiver has maxPending deliveries waiting already; it is lost silently
// when the fault draw drops it, or when a partition arises while it is
// delayed. Each snapshot is delivered by calling ReceiveSnapshot on a
// goroutine of its own, which then calls the sender's SnapshotDone; its
// size is not checked.
package transporttest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/transport"
)

// ErrUnreachable is SnapshotDone's error for a snapshot that the network
// did not deliver.
var ErrUnreachable = errors.New("transporttest: unreachable")

// maxPending bounds the deliveries waiting for one node.
const maxPending = 1 << 16

// reorderHold is how much longer than MaxDelay a reordered message waits.
const reorderHold = 5 * time.Millisecond

// Faults are the network's faults, each drawn per message.
type Faults struct {
	Drop      float64 // probability that a message (or snapshot) is lost
	Duplicate float64 // probability that a message is delivered twice
	// Reorder is the probability that a message is held back for
	// MaxDelay+5ms, for the messages sent after it to overtake it.
	Reorder            float64
	MinDelay, MaxDelay time.Duration // each message waits a uniform draw in [MinDelay, MaxDelay]
}

// Network connects endpoints in memory. Its methods are safe for
// concurrent use.
type Network struct {
	stop chan struct{} // closed by Close
	wg   sync.WaitGroup
	idle *sync.Cond // on mu: broadcast when mu.inflight falls to 0

	mu struct {
		sync.Mutex
		closed    bool
		rng       *rand.Rand
		faults    Faults
		endpoints map[uint64]*Endpoint
		part      map[uint64]int // node -> its side while partitioned; nil otherwise
		blocked   map[link]bool
		isolated  map[uint64]bool
		seq       uint64 // orders deliveries due at the same time
		inflight  int    // deliveries scheduled and snapshots sent, not done
	}
}

// link is one direction between two nodes.
type link struct{ from, to uint64 }

// NewNetwork returns a network without faults whose fault decisions are
// drawn from seed.
func NewNetwork(seed int64) *Network {
	n := &Network{stop: make(chan struct{})}
	n.idle = sync.NewCond(&n.mu)
	n.mu.rng = rand.New(rand.NewPCG(uint64(seed), 0))
	n.mu.endpoints = make(map[uint64]*Endpoint)
	n.mu.blocked = make(map[link]bool)
	n.mu.isolated = make(map[uint64]bool)
	return n
}

// SetFaults sets the faults of the messages sent from now on.
func (n *Network) SetFaults(f Faults) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.faults = f
}

// Register attaches h to node and returns the node's endpoint. Registering
// a node again (a restart) replaces its handler and drops the deliveries
// waiting for it.
func (n *Network) Register(node uint64, h transport.Handler) *Endpoint {
	n.mu.Lock()
	defer n.mu.Unlock()
	if e := n.mu.endpoints[node]; e != nil {
		n.doneLocked(len(e.pending))
		e.h, e.pending = h, nil
		return e
	}
	e := &Endpoint{net: n, node: node, h: h, wake: make(chan struct{}, 1)}
	n.mu.endpoints[node] = e
	if !n.mu.closed {
		n.wg.Add(1)
		go e.run()
	}
	return e
}

// Partition splits the nodes into the given sides: two nodes can talk only
// if they are on the same side. A node on no side can talk to no one. It
// replaces an earlier partition; messages in flight across it are lost.
func (n *Network) Partition(sides ...[]uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.part = make(map[uint64]int)
	for i, side := range sides {
		for _, node := range side {
			n.mu.part[node] = i
		}
	}
}

// Block stops the messages from node from to node to, not the other way.
func (n *Network) Block(from, to uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.blocked[link{from, to}] = true
}

// Isolate stops every message to and from node.
func (n *Network) Isolate(node uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.isolated[node] = true
}

// Heal ends partitions, blocks and isolation.
func (n *Network) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.part = nil
	clear(n.mu.blocked)
	clear(n.mu.isolated)
}

// canLocked reports whether node from can reach node to now.
func (n *Network) canLocked(from, to uint64) bool {
	if n.mu.isolated[from] || n.mu.isolated[to] || n.mu.blocked[link{from, to}] {
		return false
	}
	if n.mu.part == nil {
		return true
	}
	a, okA := n.mu.part[from]
	b, okB := n.mu.part[to]
	return okA && okB && a == b
}

// Flush waits until every message sent before it has been delivered (its
// handler call returned), dropped or reported, and every snapshot sent
// before it is done, or the network is closed.
func (n *Network) Flush() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for n.mu.inflight > 0 && !n.mu.closed {
		n.idle.Wait()
	}
}

// doneLocked counts k deliveries or snapshots done.
func (n *Network) doneLocked(k int) {
	if n.mu.inflight -= k; n.mu.inflight == 0 {
		n.idle.Broadcast()
	}
}

// Close stops every goroutine of the network, once the handler calls in
// progress return; deliveries waiting are dropped. Sends after Close do
// nothing (SendSnapshot closes its body).
func (n *Network) Close() {
	n.mu.Lock()
	if !n.mu.closed {
		n.mu.closed = true
		close(n.stop)
		n.idle.Broadcast()
	}
	n.mu.Unlock()
	n.wg.Wait()
}

// clone returns a deep copy of m, as the wire would deliver it.
func clone(m raftpb.Message) raftpb.Message {
	b, err := m.Marshal()
	var c raftpb.Message
	if err == nil {
		err = c.Unmarshal(b)
	}
	if err != nil {
		panic(fmt.Sprintf("transporttest: copying a raft message: %v", err))
	}
	return c
}

// fate is what the draws decided for one message.
type fate struct {
	drop, duplicate bool
	delay           time.Duration
}

// drawLocked draws the fate of the next message: always four numbers.
func (n *Network) drawLocked() fate {
	f, r := n.mu.faults, n.mu.rng
	drop, dup, reorder, delay := r.Float64(), r.Float64(), r.Float64(), r.Float64()
	out := fate{drop: drop < f.Drop, duplicate: dup < f.Duplicate,
		delay: f.MinDelay + time.Duration(delay*float64(f.MaxDelay-f.MinDelay))}
	if reorder < f.Reorder {
		out.delay = f.MaxDelay + reorderHold
	}
	return out
}
