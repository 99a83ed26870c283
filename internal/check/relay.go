package check

import (
	"io"
	"net"
	"sync"
	"time"

	"github.com/flintkv/flint/internal/transport"
)

// relay stands in front of one member of a cluster the checker started:
// the group knows the member's peer address as the relay's, so every
// connection another member opens to it (messages or snapshots) comes
// through here. The relay learns the caller from the connection's first
// frame, the transport's hello, and lets it through unless the checker cut
// that caller off, which is how a partition between real processes is made
// without touching the host's network.
//
// A transport connection from node A to node B carries A's messages to B
// only (B answers on its own connection to A), so cutting callers at B's
// relay cuts one direction: a one-way partition is one relay's cut, a full
// one is two.
type relay struct {
	to     uint64 // the member behind the relay, for the log
	ln     net.Listener
	target string // the member's own peer address (--peer-listen)

	mu     sync.Mutex
	cut    map[uint64]bool        // callers cut off
	conns  map[net.Conn]connRoute // connections being relayed, both ends
	closed bool
	wg     sync.WaitGroup // the accept loop and the connections' goroutines
}

// connRoute is one relayed connection: its caller and the end toward the
// member.
type connRoute struct {
	from uint64
	out  net.Conn
}

// helloTimeout bounds how long a caller may take to send its hello.
const helloTimeout = 5 * time.Second

// newRelay listens on a free port of 127.0.0.1 and relays to target.
func newRelay(to uint64, target string) (*relay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &relay{to: to, ln: ln, target: target, cut: map[uint64]bool{}, conns: map[net.Conn]connRoute{}}
	r.wg.Go(r.accept)
	return r, nil
}

func (r *relay) addr() string { return r.ln.Addr().String() }

// setCut cuts off the callers in cut, and no others: their connections in
// progress are closed, and new ones are closed once their hello names them.
func (r *relay) setCut(cut map[uint64]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cut = cut
	for in, rt := range r.conns {
		if cut[rt.from] {
			in.Close()
			rt.out.Close()
		}
	}
}

// close stops the relay and closes every connection through it.
func (r *relay) close() {
	r.ln.Close()
	r.mu.Lock()
	r.closed = true
	for in, rt := range r.conns {
		in.Close()
		rt.out.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

func (r *relay) accept() {
	for {
		in, err := r.ln.Accept()
		if err != nil {
			return // closed
		}
		r.wg.Go(func() { r.serve(in) })
	}
}

// serve relays one connection, unless its caller is cut off or it does not
// start with a hello (then the member would refuse it anyway).
func (r *relay) serve(in net.Conn) {
	defer in.Close()
	in.SetReadDeadline(time.Now().Add(helloTimeout))
	hello, from, err := transport.ReadCaller(in)
	if err != nil {
		return
	}
	in.SetReadDeadline(time.Time{})
	out, err := net.DialTimeout("tcp", r.target, helloTimeout)
	if err != nil {
		return // the member is down: the caller retries
	}
	defer out.Close()
	if !r.track(in, connRoute{from: from, out: out}) {
		return
	}
	defer r.untrack(in)
	if _, err := out.Write(hello); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		io.Copy(in, out)
		in.Close()
		close(done)
	}()
	io.Copy(out, in)
	out.Close()
	<-done
}

// track registers a connection to relay, unless its caller is cut off or
// the relay closed.
func (r *relay) track(in net.Conn, rt connRoute) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.cut[rt.from] {
		return false
	}
	r.conns[in] = rt
	return true
}

func (r *relay) untrack(in net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.conns, in)
}
