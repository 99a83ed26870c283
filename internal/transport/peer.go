package transport

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// Reconnection waits between minBackoff and maxBackoff, doubling after
// each failure, each wait drawn from its upper half.
const (
	minBackoff = 50 * time.Millisecond
	maxBackoff = time.Second
)

// keepWriteBuffer is the largest write buffer a peer keeps between writes.
const keepWriteBuffer = 4 << 20

// writeChunk is the most one write to a peer's connection carries, unless
// one message is larger: the writer encodes what it took from the queue a
// frame of at most this size at a time, writes what it encoded before a
// frame would take it past this, and lets go of each message once
// encoded. So it holds what it took and one write's worth encoded, rather
// than all it took twice (16 MiB in flight to a follower that catches up,
// and their frames). Frames of this size also keep the receiver's buffer
// (keepReadBuffer).
const writeChunk = 2 << 20

// peer is a node this transport sends messages to: its address, its send
// queue, and the goroutine (run) that connects and writes the queue.
type peer struct {
	t      *Transport
	id     uint64
	ctx    context.Context // ends at RemovePeer or Close
	cancel context.CancelFunc
	wake   chan struct{} // holds a token once the queue gains a batch or the address changes

	sent, dropped, writes atomic.Uint64

	mu struct {
		sync.Mutex
		addr string
		conn net.Conn // nil while not connected
		// Invariant: queue is empty while conn is nil.
		queue       []batch
		msgs, bytes int // the messages in queue and their encoded size
	}
}

// batch is what one Send queued.
type batch struct {
	group uint64
	msgs  []raftpb.Message
}

func newPeer(t *Transport, id uint64, addr string) *peer {
	p := &peer{t: t, id: id, wake: make(chan struct{}, 1)}
	p.ctx, p.cancel = context.WithCancel(t.ctx)
	p.mu.addr = addr
	return p
}

// poke puts a token in p.wake, unless it holds one already.
func (p *peer) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// enqueue queues msgs of group for the writer and reports whether it did:
// not while the peer is not connected, nor when the queue is full (but a
// batch is always taken by an empty queue).
func (p *peer) enqueue(group uint64, msgs []raftpb.Message) bool {
	size := 0
	for i := range msgs {
		size += msgs[i].Size()
	}
	cfg := &p.t.cfg
	p.mu.Lock()
	ok := p.mu.conn != nil && (len(p.mu.queue) == 0 ||
		p.mu.msgs+len(msgs) <= cfg.QueueMessages && p.mu.bytes+size <= cfg.QueueBytes)
	if ok {
		p.mu.queue = append(p.mu.queue, batch{group, msgs})
		p.mu.msgs += len(msgs)
		p.mu.bytes += size
	}
	p.mu.Unlock()
	if ok {
		p.poke()
	}
	return ok
}

// take empties the queue and returns what it held.
func (p *peer) take() []batch {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.mu.queue
	p.mu.queue, p.mu.msgs, p.mu.bytes = nil, 0, 0
	return q
}

// drop counts msgs as dropped and reports their route unreachable, unless
// the peer was removed.
func (p *peer) drop(group uint64, n int) {
	p.dropped.Add(uint64(n))
	if p.ctx.Err() == nil {
		p.t.notify.add(p.id, group)
	}
}

// setAddr changes the peer's address: a connection to the old one is
// closed, and what is queued for it dropped.
func (p *peer) setAddr(addr string) {
	p.mu.Lock()
	c := p.mu.conn
	changed := p.mu.addr != addr
	if changed {
		p.mu.addr, p.mu.conn = addr, nil
	}
	p.mu.Unlock()
	if changed && c != nil {
		c.Close()
		p.dropQueue()
	}
	p.poke()
}

// run connects to the peer and writes its queue, reconnecting after a
// failure with backoff, until the peer is removed or the transport closed.
func (p *peer) run() {
	var wait time.Duration
	var lastErr string
	for {
		addr, c, err := p.connect()
		if err == nil {
			wait, lastErr = 0, ""
			p.t.log.Info("connected to peer", "peer", p.id, "addr", addr)
			err = p.serve(addr, c)
		}
		if p.ctx.Err() != nil {
			return
		}
		if err.Error() != lastErr { // the same failure again is not logged again
			lastErr = err.Error()
			p.t.log.Warn("no connection to peer", "peer", p.id, "addr", addr, "err", err)
		}
		wait = min(max(2*wait, minBackoff), maxBackoff)
		if !p.sleep(wait/2 + rand.N(wait/2)) {
			return
		}
	}
}

// sleep waits for d, or less if the address changes; it returns false once
// the peer is removed or the transport closed.
func (p *peer) sleep(d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-p.ctx.Done():
		return false
	case <-timer.C:
	case <-p.wake:
	}
	return true
}

// connect dials the peer's address and authenticates.
func (p *peer) connect() (addr string, c net.Conn, err error) {
	p.mu.Lock()
	addr = p.mu.addr
	p.mu.Unlock()
	c, _, err = p.t.dial(p.ctx, addr, p.id, kindMessages)
	return addr, c, err
}

// serve writes the queue to c, connected to addr, until a write fails, the
// peer closes c or its address changes, or the peer is removed. It takes
// every batch queued at once, and writes them in order, at most writeChunk
// at a time (see write).
func (p *peer) serve(addr string, c net.Conn) error {
	defer c.Close()
	stop := context.AfterFunc(p.ctx, func() { c.Close() })
	defer stop()
	if !p.attach(addr, c) {
		return errAddrChanged
	}
	defer p.detach()
	broken := make(chan struct{})
	if !p.t.spawn(func() { watch(c); close(broken) }) {
		return ErrClosed
	}
	var buf []byte
	for {
		select {
		case <-p.ctx.Done():
			return p.ctx.Err()
		case <-broken:
			return errPeerClosed
		case <-p.wake:
		}
		batches := p.take()
		var err error
		if buf, err = p.write(c, buf[:0], batches); err != nil {
			return err
		}
		if cap(buf) > keepWriteBuffer {
			buf = nil
		}
	}
}

// attach makes c, connected to addr, the peer's connection, unless the
// address changed while it was being made.
func (p *peer) attach(addr string, c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if addr != p.mu.addr {
		return false
	}
	p.mu.conn = c
	return true
}

// detach ends the peer's connection: what is queued is dropped.
func (p *peer) detach() {
	p.mu.Lock()
	p.mu.conn = nil
	p.mu.Unlock()
	p.dropQueue()
}

// dropQueue drops what is queued.
func (p *peer) dropQueue() {
	for _, b := range p.take() {
		p.drop(b.group, len(b.msgs))
	}
}

// write encodes batches into buf and writes them to c, in writes of at
// most writeChunk bytes, unless one message is larger. Messages too large
// for a frame are dropped; so is everything not yet written when a write
// fails. It clears the messages from batches as it encodes them.
func (p *peer) write(c net.Conn, buf []byte, batches []batch) ([]byte, error) {
	n := 0 // messages in buf
	for i := range batches {
		b := &batches[i]
		for len(b.msgs) > 0 {
			k, size := piece(b.msgs)
			if len(buf) > 0 && len(buf)+size > writeChunk {
				if err := p.writeOut(c, buf, n, batches); err != nil {
					return buf, err
				}
				buf, n = buf[:0], 0
			}
			var tooLarge []raftpb.Message
			buf, tooLarge = appendMessages(buf, b.group, b.msgs[:k], p.t.cfg.MaxFrameBytes)
			if len(tooLarge) > 0 {
				p.t.log.Error("raft message too large for a frame: dropped", "peer", p.id, "group", b.group,
					"bytes", tooLarge[0].Size(), "limit", p.t.cfg.MaxFrameBytes)
				p.drop(b.group, len(tooLarge))
			}
			n += k - len(tooLarge)
			clear(b.msgs[:k])
			b.msgs = b.msgs[k:]
		}
	}
	if len(buf) == 0 {
		return buf, nil
	}
	return buf, p.writeOut(c, buf, n, batches)
}

// piece returns how many of msgs, from the first, to encode as one frame,
// and about the bytes they take: the first, and those after it while
// they fit in writeChunk.
func piece(msgs []raftpb.Message) (k, size int) {
	size = headerSize + binary.MaxVarintLen64 + msgs[0].Size()
	for k = 1; k < len(msgs); k++ {
		next := binary.MaxVarintLen64 + msgs[k].Size()
		if size+next > writeChunk {
			break
		}
		size += next
	}
	return k, size
}

// writeOut writes buf, which holds n messages, to c. If the write fails,
// those and the messages left in batches are dropped, and the groups of
// batches reported unreachable.
func (p *peer) writeOut(c net.Conn, buf []byte, n int, batches []batch) error {
	p.writes.Add(1)
	if _, err := c.Write(buf); err != nil {
		for _, b := range batches {
			n += len(b.msgs)
		}
		p.dropped.Add(uint64(n)) // the messages too large are counted already
		for _, b := range batches {
			p.drop(b.group, 0)
		}
		return err
	}
	p.sent.Add(uint64(n))
	return nil
}

// watch returns once c is closed at either end. The peer never writes on a
// messages connection once it has accepted it, so a read returns only then.
func watch(c net.Conn) {
	var b [1]byte
	c.Read(b[:])
}
