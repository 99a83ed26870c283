package resptest

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// CutProxy forwards connections on loopback to a server, and cuts a
// connection after the server answered a read of the client's that cut
// chose, dropping the reply: the request has taken effect and the client
// cannot know it. (A read of the client's holds what one Read returned,
// which is one request or more as the client wrote them.)
type CutProxy struct {
	Addr  string
	cut   func(request []byte) bool
	cuts  atomic.Int64
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

// StartCutProxy starts a CutProxy to the server at to. It is stopped when
// the test ends.
func StartCutProxy(t testing.TB, to string, cut func(request []byte) bool) *CutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &CutProxy{Addr: ln.Addr().String(), cut: cut}
	p.wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			sc, err := net.Dial("tcp", to)
			if err != nil {
				nc.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, nc, sc)
			p.mu.Unlock()
			p.wg.Go(func() { p.pipe(nc, sc) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

// pipe forwards one connection both ways, cutting it as CutProxy says.
func (p *CutProxy) pipe(nc, sc net.Conn) {
	defer nc.Close()
	defer sc.Close()
	var armed atomic.Bool
	p.wg.Go(func() {
		defer sc.Close()
		buf := make([]byte, 64<<10)
		for {
			n, err := nc.Read(buf)
			if err != nil {
				return
			}
			if p.cut(buf[:n]) {
				armed.Store(true)
			}
			if _, err := sc.Write(buf[:n]); err != nil {
				return
			}
		}
	})
	buf := make([]byte, 64<<10)
	for {
		n, err := sc.Read(buf)
		if err != nil {
			return
		}
		if armed.Load() { // the reply came: the INCR took effect
			p.cuts.Add(1)
			return
		}
		if _, err := nc.Write(buf[:n]); err != nil {
			return
		}
	}
}

// Cuts returns how many connections the proxy has cut.
func (p *CutProxy) Cuts() int64 { return p.cuts.Load() }
