package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/flintkv/flint/internal/protocol"
)

// pool is the connections to one member, which calls spread over
// round-robin.
type pool struct {
	addr  string
	c     *Client // for its options, closed flag and WaitGroup
	next  atomic.Uint64
	slots []slot
	// forgotten is set once the Client has dropped the member (see forget).
	forgotten atomic.Bool
}

// slot holds one connection of the pool, replaced when it fails.
type slot struct {
	lock chan struct{} // capacity 1; held to replace cn, so one dial at a time
	cn   atomic.Pointer[conn]
}

// errForgotten is the cause of the failure of the connections of a member
// the Client no longer remembers.
var errForgotten = errors.New("client: member forgotten: the servers named too many other addresses since")

func newPool(c *Client, addr string) *pool {
	p := &pool{addr: addr, c: c, slots: make([]slot, c.opts.poolSize)}
	for i := range p.slots {
		p.slots[i].lock = make(chan struct{}, 1)
	}
	return p
}

// fill opens every connection of the pool, for New.
func (p *pool) fill() error {
	for i := range p.slots {
		if _, err := p.replace(context.Background(), &p.slots[i]); err != nil {
			return err
		}
	}
	return nil
}

// close fails every connection of the pool with cause, for Client.Close,
// waiting out dials in progress; the Client's closed flag, set before,
// keeps new ones from starting.
func (p *pool) close(cause error) {
	for i := range p.slots {
		s := &p.slots[i]
		s.lock <- struct{}{}
		if cn := s.cn.Load(); cn != nil {
			cn.fail(cause)
		}
		<-s.lock
	}
}

// forget fails the pool's connections for good, for a member the Client
// has dropped: calls in flight on them end with ErrUnknownOutcome, and
// calls about to use them with ErrConnect, so they try another member. It
// does not wait for a dial in progress, so that it may be called under the
// Client's lock: replace fails the connection such a dial opens.
func (p *pool) forget() {
	p.forgotten.Store(true)
	for i := range p.slots {
		if cn := p.slots[i].cn.Load(); cn != nil {
			cn.fail(errForgotten)
		}
	}
}

// send runs cmd, which holds n encoded commands, on one of the pool's
// connections and returns their n replies, error replies included. A
// connection that broke before writing the request is replaced and the
// request sent again at once, only once: nothing was sent, so nothing can
// apply twice, and a connection the server closed while idle costs no
// backoff.
func (p *pool) send(ctx context.Context, cmd []byte, n int) ([]Value, error) {
	for attempt := 0; ; attempt++ {
		cn, err := p.pick(ctx)
		if err != nil {
			return nil, err
		}
		cl := newCall(cmd, n)
		if err = cn.submit(cl); err == nil {
			var replies []Value
			replies, err = cn.wait(ctx, cl)
			if err == nil {
				return replies, nil
			}
		}
		if !errors.Is(err, ErrConnect) || attempt > 0 {
			return nil, err
		}
	}
}

// connected reports whether one of the pool's connections is open.
func (p *pool) connected() bool {
	for i := range p.slots {
		if cn := p.slots[i].cn.Load(); cn != nil && cn.healthy() {
			return true
		}
	}
	return false
}

// pick returns the next healthy connection round-robin, dialing a new one
// if the slot's has failed.
func (p *pool) pick(ctx context.Context) (*conn, error) {
	if p.c.closed.Load() {
		return nil, ErrClosed
	}
	s := &p.slots[p.next.Add(1)%uint64(len(p.slots))]
	if cn := s.cn.Load(); cn != nil && cn.healthy() {
		return cn, nil
	}
	return p.replace(ctx, s)
}

// replace dials a connection for s unless another goroutine just did.
func (p *pool) replace(ctx context.Context, s *slot) (*conn, error) {
	select {
	case s.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: waiting for a connection to %s: %w", ErrConnect, p.addr, ctx.Err())
	}
	defer func() { <-s.lock }()
	switch {
	case p.c.closed.Load():
		return nil, ErrClosed
	case p.forgotten.Load():
		return nil, notSent(errForgotten)
	}
	if cn := s.cn.Load(); cn != nil && cn.healthy() {
		return cn, nil
	}
	cn, err := p.dial(ctx)
	if err != nil {
		return nil, err
	}
	s.cn.Store(cn)
	if p.forgotten.Load() { // forget may have run during the dial, missing cn
		cn.fail(errForgotten)
		return nil, notSent(errForgotten)
	}
	return cn, nil
}

// dial opens a connection, authenticates it and starts its goroutines.
func (p *pool) dial(ctx context.Context) (*conn, error) {
	// Count the goroutines before dialing: Close waits out the dials of its
	// members' pools, but not that of a pool forgotten meanwhile, and the
	// WaitGroup must not go up from zero while Close waits on it.
	p.c.wg.Add(2)
	cn, rd, err := p.open(ctx)
	if err != nil {
		p.c.wg.Add(-2)
		return nil, err
	}
	go func() { defer p.c.wg.Done(); cn.readLoop(rd) }()
	go func() { defer p.c.wg.Done(); cn.writeLoop() }()
	return cn, nil
}

// open connects to the pool's member and authenticates.
func (p *pool) open(ctx context.Context) (*conn, *protocol.Reader, error) {
	ctx, cancel := context.WithTimeout(ctx, p.c.opts.dialTimeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrConnect, err)
	}
	rd := protocol.NewReader(bufio.NewReaderSize(nc, 32<<10), protocol.DefaultReaderLimits)
	if err := p.handshake(ctx, nc, rd); err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("%w: %s: %w", ErrConnect, p.addr, err)
	}
	return newConn(nc, p.addr), rd, nil
}

// handshake sends HELLO or AUTH, as the options ask, before the connection
// is shared.
func (p *pool) handshake(ctx context.Context, nc net.Conn, rd *protocol.Reader) error {
	var cmd []byte
	switch pw := p.c.opts.password; {
	case p.c.opts.protocol == 3 && pw != "":
		cmd = appendArgs(nil, "HELLO", "3", "AUTH", "default", pw)
	case p.c.opts.protocol == 3:
		cmd = appendArgs(nil, "HELLO", "3")
	case pw != "":
		cmd = appendArgs(nil, "AUTH", pw)
	default:
		return nil
	}
	deadline, _ := ctx.Deadline() // dial gave ctx a timeout
	nc.SetDeadline(deadline)
	defer nc.SetDeadline(time.Time{})
	if _, err := nc.Write(cmd); err != nil {
		return err
	}
	v, err := rd.Read()
	if err != nil {
		return err
	}
	if v.IsError() {
		return &ReplyError{Msg: string(v.Str)}
	}
	return nil
}

// refusedHandshake reports whether err is a server's refusal of AUTH or
// HELLO for a reason that retrying will not cure, such as a wrong password.
func refusedHandshake(err error) bool {
	re, ok := errors.AsType[*ReplyError](err)
	return ok && refusalOf([]byte(re.Msg)) == accepted
}
