package transporttest

import (
	"container/heap"
	"io"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/transport"
)

// Endpoint is one node's attachment to a Network: it implements
// transport.Sender.
type Endpoint struct {
	net  *Network
	node uint64
	wake chan struct{} // holds a token once a delivery is scheduled

	// Guarded by net.mu.
	h       transport.Handler
	pending deliveries
}

var _ transport.Sender = (*Endpoint)(nil)

// Send delivers each of msgs to node to, as the faults decide. It never
// blocks.
func (e *Endpoint) Send(to, group uint64, msgs []raftpb.Message) {
	n := e.net
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.closed {
		return
	}
	now := time.Now()
	for _, m := range msgs {
		f := n.drawLocked()
		dst := n.mu.endpoints[to]
		switch {
		case dst == nil || !n.canLocked(e.node, to) || len(dst.pending) >= maxPending:
			e.scheduleLocked(delivery{at: now, from: to, group: group, unreachable: true})
		case f.drop:
		default:
			d := delivery{at: now.Add(f.delay), from: e.node, group: group, m: m}
			dst.scheduleLocked(d)
			if f.duplicate {
				dst.scheduleLocked(d)
			}
		}
	}
}

// SendSnapshot hands body to node to's ReceiveSnapshot on a goroutine of
// its own, unless the network does not deliver it, and then reports to
// SnapshotDone. It never blocks.
func (e *Endpoint) SendSnapshot(to, group uint64, m raftpb.Message, body io.ReadCloser, size int64) {
	n := e.net
	n.mu.Lock()
	if n.mu.closed {
		n.mu.Unlock()
		body.Close()
		return
	}
	var receiver transport.Handler
	drop := n.mu.rng.Float64() < n.mu.faults.Drop
	if dst := n.mu.endpoints[to]; dst != nil && !drop && n.canLocked(e.node, to) {
		receiver = dst.h
	}
	sender := e.h
	n.mu.inflight++
	n.wg.Add(1)
	n.mu.Unlock()
	go func() {
		defer n.wg.Done()
		err := ErrUnreachable
		if receiver != nil {
			err = receiver.ReceiveSnapshot(e.node, group, clone(m), struct{ io.Reader }{body})
		}
		body.Close()
		sender.SnapshotDone(to, group, err)
		n.mu.Lock()
		n.doneLocked(1)
		n.mu.Unlock()
	}()
}

// scheduleLocked adds d to the endpoint's deliveries.
func (e *Endpoint) scheduleLocked(d delivery) {
	e.net.mu.seq++
	d.seq = e.net.mu.seq
	heap.Push(&e.pending, d)
	e.net.mu.inflight++
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// run makes the endpoint's handler calls as they fall due, until the
// network closes.
func (e *Endpoint) run() {
	defer e.net.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		due, h, next := e.due()
		for _, d := range due {
			e.deliver(h, d)
		}
		if len(due) > 0 {
			e.net.mu.Lock()
			e.net.doneLocked(len(due))
			e.net.mu.Unlock()
			continue
		}
		timer.Reset(next)
		select {
		case <-e.net.stop:
			return
		case <-e.wake:
		case <-timer.C:
		}
	}
}

// due takes the deliveries due now, with the handler to give them to, or
// says how long until the next one.
func (e *Endpoint) due() (due []delivery, h transport.Handler, next time.Duration) {
	n := e.net
	n.mu.Lock()
	defer n.mu.Unlock()
	now := time.Now()
	for len(e.pending) > 0 && !e.pending[0].at.After(now) {
		d := heap.Pop(&e.pending).(delivery)
		if d.unreachable || n.canLocked(d.from, e.node) {
			due = append(due, d)
		} else {
			n.doneLocked(1) // lost in flight
		}
	}
	next = time.Hour
	if len(e.pending) > 0 {
		next = e.pending[0].at.Sub(now)
	}
	return due, e.h, next
}

// deliver makes the handler call of d.
func (e *Endpoint) deliver(h transport.Handler, d delivery) {
	if d.unreachable {
		h.Unreachable(d.from, d.group)
		return
	}
	h.Receive(d.from, d.group, []raftpb.Message{clone(d.m)})
}

// deliveries is a heap of deliveries, the first due first.
type deliveries []delivery

// delivery is one handler call waiting for its time.
type delivery struct {
	at          time.Time
	seq         uint64
	from, group uint64 // for Unreachable, from is the node unreachable
	m           raftpb.Message
	unreachable bool
}

func (d deliveries) Len() int { return len(d) }
func (d deliveries) Less(i, j int) bool {
	if !d[i].at.Equal(d[j].at) {
		return d[i].at.Before(d[j].at)
	}
	return d[i].seq < d[j].seq
}
func (d deliveries) Swap(i, j int) { d[i], d[j] = d[j], d[i] }
func (d *deliveries) Push(x any)   { *d = append(*d, x.(delivery)) }
func (d *deliveries) Pop() any {
	old := *d
	x := old[len(old)-1]
	*d = old[:len(old)-1]
	return x
}
