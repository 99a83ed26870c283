package server

import (
	"bufio"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/flintkv/flint/internal/protocol"
)

// Forwarding: a message published on one node of a cluster (a replicated
// group, or a sharded cluster) reaches the subscribers of every node, as in
// Redis Cluster, whose nodes pass PUBLISH over their cluster bus. A
// node sends each message it is published to every other node it knows,
// as FLINT.PUBLISH channel message, which delivers to that node's own
// subscribers only, so a message is never forwarded twice. SPUBLISH goes
// likewise, as FLINT.SPUBLISH, to the other members of the node's group
// only, as Redis sends it to the nodes of the shard.
//
// The nodes are those of the node's group (its ClusterView) and, in a
// sharded cluster, every member of every group of the cluster map it
// knows, and the managers it was given (Shards.Managers), looked up again
// at most once per peerRefresh. So a manager forwards to the data nodes and
// its fellow managers, and a data node to the other data nodes and the
// managers.
//
// Each node has a link: one connection (with AUTH first when this node
// requires a password; the nodes of a cluster share it), one goroutine,
// and a queue of at most linkQueue bytes of commands, written in order and
// pipelined; their replies are read and dropped. What does not fit the
// queue, or was queued while the node cannot be reached, is dropped and
// logged: forwarding is best effort, bounded in memory, and never slows
// the publisher, like Redis Cluster's.

// Bounds of forwarding.
const (
	peerRefresh = time.Second
	linkQueue   = 8 << 20
	linkTimeout = 3 * time.Second // to dial, and for a write to make progress
	linkBackoff = time.Second     // after a failure, before dialing again
)

// forwarder holds a server's links to the other nodes of its cluster.
type forwarder struct {
	srv *Server
	mu  struct {
		sync.Mutex
		links     map[string]*link // by client address
		group     []string         // the addresses of the other members of the group
		refreshed time.Time        // when links was last matched to the cluster's nodes
		stopped   bool
	}
}

// forwardPublish sends a message published here to the other nodes, as
// the command name (FLINT.PUBLISH, or FLINT.SPUBLISH for the group only).
func (s *Server) forwardPublish(name string, channel, msg []byte) {
	if s.cluster == nil {
		return
	}
	links := s.fwd.links(name == "FLINT.SPUBLISH")
	if len(links) == 0 {
		return
	}
	cmd := protocol.AppendCommand(nil, []byte(name), channel, msg)
	for _, l := range links {
		l.add(cmd)
	}
}

// links returns the links to the cluster's other nodes, or to the other
// members of the group only, first matching them to the nodes the server
// knows if that was not done lately.
func (f *forwarder) links(group bool) []*link {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mu.stopped {
		return nil
	}
	if now := time.Now(); now.Sub(f.mu.refreshed) >= peerRefresh {
		f.mu.refreshed = now
		addrs, members := f.srv.peerAddrs()
		f.matchLocked(addrs)
		f.mu.group = members
	}
	ls := make([]*link, 0, len(f.mu.links))
	for addr, l := range f.mu.links {
		if !group || slices.Contains(f.mu.group, addr) {
			ls = append(ls, l)
		}
	}
	return ls
}

// matchLocked starts a link to each of addrs that has none, and stops the
// links to nodes no longer among them.
func (f *forwarder) matchLocked(addrs []string) {
	if f.mu.links == nil {
		f.mu.links = make(map[string]*link)
	}
	for addr, l := range f.mu.links {
		if !slices.Contains(addrs, addr) {
			l.stop()
			delete(f.mu.links, addr)
		}
	}
	for _, addr := range addrs {
		if f.mu.links[addr] == nil {
			l := &link{srv: f.srv, addr: addr, wake: make(chan struct{}, 1), done: make(chan struct{})}
			f.mu.links[addr] = l
			go l.run()
		}
	}
}

// stop stops every link; forwardPublish then forwards nothing.
func (f *forwarder) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.stopped = true
	for _, l := range f.mu.links {
		l.stop()
	}
	f.mu.links = nil
}

// peerAddrs returns the client addresses of the other nodes of the
// server's cluster (its group's members, every data group's members in the
// map, and the managers), and of the other members of its group.
func (s *Server) peerAddrs() (all, group []string) {
	v := s.cluster.ClusterView()
	self, _ := v.member(v.Self)
	others := func(addrs []string) []string {
		slices.Sort(addrs)
		return slices.DeleteFunc(slices.Compact(addrs), func(a string) bool { return a == self.Addr || a == "" })
	}
	var addrs []string
	for _, m := range v.Members {
		addrs = append(addrs, m.Addr)
	}
	group = others(slices.Clone(addrs))
	if s.sharded != nil {
		if sh := s.sharded.Shards(); sh != nil && sh.Map != nil {
			addrs = append(addrs, sh.Managers...)
			for _, g := range sh.Map.Groups {
				for _, m := range g.Members {
					addrs = append(addrs, m.Addr)
				}
			}
		}
	}
	return others(addrs), group
}

// link forwards messages to one node.
type link struct {
	srv  *Server
	addr string
	wake chan struct{} // signalled when the queue gets bytes; capacity 1
	done chan struct{} // closed by stop
	once sync.Once
	mu   struct {
		sync.Mutex
		queue   []byte // Invariant: len(queue) <= linkQueue
		dropped int64  // messages dropped since the last report
	}
}

// add queues cmd, or drops it if the queue is full.
func (l *link) add(cmd []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.mu.queue)+len(cmd) > linkQueue {
		l.mu.dropped++
		return
	}
	l.mu.queue = append(l.mu.queue, cmd...)
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *link) stop() { l.once.Do(func() { close(l.done) }) }

// take returns what is queued, emptying the queue, and the number of
// messages dropped since it was last asked; or false once stopped.
func (l *link) take() ([]byte, int64, bool) {
	for {
		l.mu.Lock()
		q, dropped := l.mu.queue, l.mu.dropped
		l.mu.queue, l.mu.dropped = nil, 0
		l.mu.Unlock()
		if len(q) > 0 || dropped > 0 {
			return q, dropped, true
		}
		select {
		case <-l.wake:
		case <-l.done:
			return nil, 0, false
		}
	}
}

// run writes what is queued to the node until the link stops, dialing it
// when there is something to send and no connection.
func (l *link) run() {
	var nc net.Conn
	down := false // the node could not be reached, and has not been since
	defer func() {
		if nc != nil {
			nc.Close()
		}
	}()
	for {
		buf, dropped, ok := l.take()
		if !ok {
			return
		}
		if dropped > 0 {
			l.srv.log.Warn("pub/sub: dropped messages for a node whose queue is full", "node", l.addr, "messages", dropped)
		}
		if len(buf) == 0 {
			continue
		}
		if nc == nil {
			nc = l.dial()
		}
		var err error
		if nc != nil {
			nc.SetWriteDeadline(time.Now().Add(linkTimeout))
			if _, err = nc.Write(buf); err != nil {
				nc.Close()
				nc = nil
			}
		}
		switch {
		case nc == nil && !down:
			l.srv.log.Warn("pub/sub: cannot forward messages to a node; dropping them until it can be reached", "node", l.addr, "err", err)
			fallthrough
		case nc == nil:
			down = true
			l.pause()
		case down:
			l.srv.log.Info("pub/sub: forwarding messages to a node again", "node", l.addr)
			down = false
		}
	}
}

// dial connects to the node, sends AUTH if this server requires a
// password, and starts reading replies; it returns nil on failure.
func (l *link) dial() net.Conn {
	nc, err := net.DialTimeout("tcp", l.addr, linkTimeout)
	if err != nil {
		return nil
	}
	if pass := l.srv.cfg.RequirePass; pass != "" {
		nc.SetWriteDeadline(time.Now().Add(linkTimeout))
		if _, err := nc.Write(protocol.AppendCommand(nil, []byte("AUTH"), []byte(pass))); err != nil {
			nc.Close()
			return nil
		}
	}
	go l.readReplies(nc)
	return nc
}

// readReplies reads and drops the node's replies until the connection
// closes, logging the first error reply: a node that refuses
// FLINT.PUBLISH (NOAUTH, say) refuses every one.
func (l *link) readReplies(nc net.Conn) {
	rd := protocol.NewReader(bufio.NewReader(nc), protocol.DefaultReaderLimits)
	logged := false
	for {
		v, err := rd.Read()
		if err != nil {
			return
		}
		if v.IsError() && !logged {
			logged = true
			l.srv.log.Warn("pub/sub: a node refuses forwarded messages", "node", l.addr, "reply", string(v.Str))
		}
	}
}

// pause waits linkBackoff, or until the link stops.
func (l *link) pause() {
	t := time.NewTimer(linkBackoff)
	defer t.Stop()
	select {
	case <-t.C:
	case <-l.done:
	}
}
