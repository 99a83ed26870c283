package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// Timeouts of connecting: dialing, and the whole handshake.
const (
	dialTimeout      = 2 * time.Second
	handshakeTimeout = 5 * time.Second
)

// readBufferSize is the size of each connection's read buffer.
const readBufferSize = 64 << 10

// dial connects to node to at addr for a connection of the given kind and
// authenticates both ways. The frameReader reads what the peer sends next,
// with the MaxFrameBytes limit.
func (t *Transport) dial(ctx context.Context, addr string, to uint64, kind byte) (net.Conn, *frameReader, error) {
	d := net.Dialer{Timeout: dialTimeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	r := &frameReader{r: bufio.NewReaderSize(c, readBufferSize), max: maxHandshakeFrame}
	hs := handshake{r: r, w: c, secret: t.cfg.Secret}
	h := hello{version: version, kind: kind, cluster: t.cfg.ClusterID, from: t.cfg.NodeID, to: to, nonce: newNonce(), addr: t.cfg.Advertise}
	if err := hs.client(h); err != nil {
		if errors.Is(err, ErrAuth) {
			hs.send(typeStatus, []byte(err.Error())) // tell the server why, if it listens
		}
		c.Close()
		return nil, nil, fmt.Errorf("handshake with node %d: %w", to, err)
	}
	c.SetDeadline(time.Time{})
	r.max = t.cfg.MaxFrameBytes
	return c, r, nil
}

// accept takes peer connections until the listener is closed, serving each
// on a goroutine of its own.
func (t *Transport) accept() {
	for {
		c, err := t.cfg.Listener.Accept()
		if err != nil {
			if t.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			t.log.Warn("accepting peer connections", "err", err)
			if !t.pause(acceptRetry) {
				return
			}
			continue
		}
		select {
		case t.pending <- struct{}{}:
		default:
			t.log.Debug("too many peer connections in their handshake: closed one", "remote", c.RemoteAddr())
			c.Close()
			continue
		}
		if !t.spawn(func() { t.serveConn(c) }) {
			c.Close()
			return
		}
	}
}

// acceptRetry is how long accept waits after an error (such as too many
// open files) before it accepts again.
const acceptRetry = 50 * time.Millisecond

// pause waits for d and reports whether the transport is still open.
func (t *Transport) pause(d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-t.ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// serveConn authenticates a connection that arrived and serves it by kind.
// A peer refused is logged once, with the reason, and its connection closed.
func (t *Transport) serveConn(c net.Conn) {
	defer c.Close()
	stop := t.closeWithTransport(c)
	defer stop()
	r, h, err := t.admit(c)
	if err != nil {
		if t.ctx.Err() == nil {
			t.log.Warn("refused a peer connection", "remote", c.RemoteAddr(), "err", err)
		}
		return
	}
	t.learn(h.from, h.addr)
	switch h.kind {
	case kindMessages:
		t.receiveMessages(c, r, h.from)
	case kindSnapshot:
		t.receiveSnapshot(c, r, h.from)
	}
}

// admit runs the server side of the handshake on c and accepts the peer.
// A refusal is sent to the peer as a status frame, if it can be.
func (t *Transport) admit(c net.Conn) (*frameReader, hello, error) {
	defer func() { <-t.pending }()
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	r := &frameReader{r: bufio.NewReaderSize(c, readBufferSize), max: maxHandshakeFrame}
	hs := handshake{r: r, w: c, secret: t.cfg.Secret}
	h, err := hs.server(t.cfg.ClusterID, t.cfg.NodeID)
	if err != nil {
		if !errors.Is(err, ErrRefused) {
			hs.send(typeStatus, []byte(err.Error()))
		}
		return nil, h, err
	}
	if err := hs.send(typeStatus, nil); err != nil {
		return nil, h, err
	}
	c.SetDeadline(time.Time{})
	r.max = t.cfg.MaxFrameBytes
	return r, h, nil
}
