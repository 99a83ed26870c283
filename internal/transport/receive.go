package transport

import (
	"errors"
	"fmt"
	"io"
	"net"
)

// receiveMessages hands the messages arriving on c, from node from, to the
// handler, one frame at a time, until c fails or carries a bad frame: that
// closes c only. A newer connection from the same node replaces c.
func (t *Transport) receiveMessages(c net.Conn, r *frameReader, from uint64) {
	t.setInbound(from, c)
	defer t.clearInbound(from, c)
	for {
		f, err := r.next()
		if err == nil && f.typ != typeMessages {
			err = fmt.Errorf("%w: frame of type %d on a messages connection", ErrMalformed, f.typ)
		}
		if err != nil {
			t.logEnd(from, c, err)
			return
		}
		msgs, err := decodeMessages(f.payload)
		if err != nil {
			t.logEnd(from, c, fmt.Errorf("group %d: %w", f.group, err))
			return
		}
		if len(msgs) > 0 {
			t.cfg.Handler.Receive(from, f.group, msgs)
		}
	}
}

// logEnd logs why the connection c from node from ended: a bad frame as a
// warning, the peer closing it as information, and nothing when this node
// closed it.
func (t *Transport) logEnd(from uint64, c net.Conn, err error) {
	switch {
	case t.ctx.Err() != nil || errors.Is(err, net.ErrClosed):
	case errors.Is(err, io.EOF):
		t.log.Info("peer closed its connection", "peer", from)
	default:
		t.log.Warn("closed a peer connection", "peer", from, "remote", c.RemoteAddr(), "err", err)
	}
}

// setInbound records c as node from's messages connection, closing the one
// it replaces: a node that connects again has given up the old one.
func (t *Transport) setInbound(from uint64, c net.Conn) {
	t.mu.Lock()
	old := t.mu.inbound[from]
	t.mu.inbound[from] = c
	t.mu.Unlock()
	if old != nil {
		old.Close()
	}
}

// clearInbound forgets c as node from's messages connection, unless it was
// replaced.
func (t *Transport) clearInbound(from uint64, c net.Conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.inbound[from] == c {
		delete(t.mu.inbound, from)
	}
}
