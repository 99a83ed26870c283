package transport

import (
	"cmp"
	"slices"

	"go.etcd.io/raft/v3/raftpb"
)

// SetPeer adds node at addr (host:port), or changes its address: a
// connection to the old address is closed. The transport connects at once
// and keeps reconnecting until RemovePeer or Close.
func (t *Transport) SetPeer(node uint64, addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.setPeerLocked(node, addr)
}

func (t *Transport) setPeerLocked(node uint64, addr string) {
	if p := t.mu.peers[node]; p != nil {
		p.setAddr(addr)
		return
	}
	p := newPeer(t, node, addr)
	if t.spawnLocked(p.run) {
		t.mu.peers[node] = p
	}
}

// learn connects to node at addr, the address its hello gave, if no peer
// is set for it: a node that joins a group knows only the members it was
// started with until it learns the others from the group, and must be
// able to answer a leader added since. SetPeer and RemovePeer, which
// follow the group's configuration, override what is learned. Only
// authenticated peers are learned from.
func (t *Transport) learn(node uint64, addr string) {
	if addr == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.peers[node] == nil {
		t.log.Info("learned a peer's address from its connection", "peer", node, "addr", addr)
		t.setPeerLocked(node, addr)
	}
}

// RemovePeer forgets node: its connection is closed and what is queued for
// it dropped without being reported. Snapshot streams already started go
// on. It does not wait for the peer's goroutines.
func (t *Transport) RemovePeer(node uint64) {
	t.mu.Lock()
	p := t.mu.peers[node]
	delete(t.mu.peers, node)
	t.mu.Unlock()
	if p != nil {
		p.cancel()
	}
}

// Send queues msgs of group for node to. It never blocks: messages for a
// node that is not connected, or whose queue is full, are dropped, and the
// handler hears of it through Unreachable, from another goroutine. The
// transport owns msgs from now on; the caller does not modify them.
func (t *Transport) Send(to, group uint64, msgs []raftpb.Message) {
	if len(msgs) == 0 {
		return
	}
	t.mu.Lock()
	p, closed := t.mu.peers[to], t.mu.closed
	t.mu.Unlock()
	switch {
	case closed:
	case p == nil:
		t.notify.add(to, group)
	case !p.enqueue(group, msgs):
		p.drop(group, len(msgs))
	}
}

// peerAddr returns node's address, if it is a peer.
func (t *Transport) peerAddr(node uint64) (string, bool) {
	t.mu.Lock()
	p := t.mu.peers[node]
	t.mu.Unlock()
	if p == nil {
		return "", false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.addr, true
}

// PeerStatus is what Stats says of one peer.
type PeerStatus struct {
	Node      uint64
	Addr      string
	Connected bool
	Sent      uint64 // messages written to the peer's connection
	Dropped   uint64 // messages dropped: not connected, queue full, a write failed, or too large for a frame
	Writes    uint64 // writes to the connection: each carries messages queued when it started, about 2 MiB at most (or one message)
}

// Stats returns the status of every peer, by node id.
func (t *Transport) Stats() []PeerStatus {
	t.mu.Lock()
	peers := make([]*peer, 0, len(t.mu.peers))
	for _, p := range t.mu.peers {
		peers = append(peers, p)
	}
	t.mu.Unlock()
	out := make([]PeerStatus, 0, len(peers))
	for _, p := range peers {
		out = append(out, p.status())
	}
	slices.SortFunc(out, func(a, b PeerStatus) int { return cmp.Compare(a.Node, b.Node) })
	return out
}

// status returns the peer's PeerStatus.
func (p *peer) status() PeerStatus {
	p.mu.Lock()
	s := PeerStatus{Node: p.id, Addr: p.mu.addr, Connected: p.mu.conn != nil}
	p.mu.Unlock()
	s.Sent, s.Dropped, s.Writes = p.sent.Load(), p.dropped.Load(), p.writes.Load()
	return s
}
