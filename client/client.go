package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flintkv/flint/internal/protocol"
)

// Value is one reply as the server sent it. Str holds the bytes of strings
// and error messages, Int integers and booleans, Elems the elements of
// aggregates (a map's keys and values alternate). The slices belong to the
// caller.
type Value = protocol.Value

// Kind is the RESP type of a Value.
type Kind = protocol.Kind

// The kinds of Value. RESP2 null bulk strings and null arrays are KindNull,
// and RESP3 bulk errors are KindError.
const (
	KindSimple = protocol.KindSimple
	KindError  = protocol.KindError
	KindInt    = protocol.KindInt
	KindBulk   = protocol.KindBulk
	KindArray  = protocol.KindArray
	KindNull   = protocol.KindNull
	KindDouble = protocol.KindDouble
	KindBool   = protocol.KindBool
	KindBigNum = protocol.KindBigNum
	KindVerbat = protocol.KindVerbat
	KindMap    = protocol.KindMap
	KindSet    = protocol.KindSet
)

// Option configures a Client.
type Option func(*options)

type options struct {
	password    string
	poolSize    int
	dialTimeout time.Duration
	protocol    int
}

// Defaults of the options.
const (
	DefaultPoolSize    = 2
	DefaultDialTimeout = 5 * time.Second
)

// WithPassword makes every connection AUTH with password (as the user
// "default") before its first command.
func WithPassword(password string) Option { return func(o *options) { o.password = password } }

// WithPoolSize sets how many connections the Client spreads calls over
// (default 2). More connections let the server use more cores; fewer let
// more calls share each write.
func WithPoolSize(n int) Option { return func(o *options) { o.poolSize = n } }

// WithDialTimeout bounds connecting, including AUTH and HELLO (default 5s).
func WithDialTimeout(d time.Duration) Option { return func(o *options) { o.dialTimeout = d } }

// WithProtocol selects RESP2 (2, the default) or RESP3 (3, negotiated with
// HELLO 3 on connect).
func WithProtocol(version int) Option { return func(o *options) { o.protocol = version } }

// Client is a pool of pipelined connections to one server. Its methods may
// be called from any number of goroutines at once.
type Client struct {
	addr   string
	opts   options
	next   atomic.Uint64 // round-robin position in slots
	slots  []slot
	closed atomic.Bool
	wg     sync.WaitGroup // the reader and writer of every connection ever opened
}

// slot holds one connection of the pool, replaced when it fails.
type slot struct {
	lock chan struct{} // capacity 1; held to replace cn, so one dial at a time
	cn   atomic.Pointer[conn]
}

// New connects to the server at addr (host:port), opening every connection
// of the pool. The error wraps ErrConnect if any cannot be opened, and a
// *ReplyError if the server refused AUTH or HELLO.
func New(addr string, opts ...Option) (*Client, error) {
	o := options{poolSize: DefaultPoolSize, dialTimeout: DefaultDialTimeout, protocol: 2}
	for _, opt := range opts {
		opt(&o)
	}
	if o.poolSize < 1 || o.dialTimeout <= 0 || (o.protocol != 2 && o.protocol != 3) {
		return nil, fmt.Errorf("client: bad options: pool size %d, dial timeout %v, protocol %d (want >= 1, > 0, 2 or 3)",
			o.poolSize, o.dialTimeout, o.protocol)
	}
	c := &Client{addr: addr, opts: o, slots: make([]slot, o.poolSize)}
	for i := range c.slots {
		c.slots[i].lock = make(chan struct{}, 1)
	}
	for i := range c.slots {
		if _, err := c.replace(context.Background(), &c.slots[i]); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// Close closes every connection and waits for their goroutines to exit.
// Calls still waiting fail with ErrClosed, wrapped with ErrUnknownOutcome
// if their requests were written. Closing twice is harmless.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	for i := range c.slots {
		s := &c.slots[i]
		s.lock <- struct{}{} // wait out a dial in progress; later ones see closed
		if cn := s.cn.Load(); cn != nil {
			cn.fail(ErrClosed)
		}
		<-s.lock
	}
	c.wg.Wait()
	return nil
}

// pick returns the next healthy connection round-robin, dialing a new one
// if the slot's has failed.
func (c *Client) pick(ctx context.Context) (*conn, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	s := &c.slots[c.next.Add(1)%uint64(len(c.slots))]
	if cn := s.cn.Load(); cn != nil && cn.healthy() {
		return cn, nil
	}
	return c.replace(ctx, s)
}

// replace dials a connection for s unless another goroutine just did.
func (c *Client) replace(ctx context.Context, s *slot) (*conn, error) {
	select {
	case s.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: waiting for a connection: %w", ErrConnect, ctx.Err())
	}
	defer func() { <-s.lock }()
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if cn := s.cn.Load(); cn != nil && cn.healthy() {
		return cn, nil
	}
	cn, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	s.cn.Store(cn)
	return cn, nil
}

// dial opens a connection, authenticates it and starts its goroutines.
func (c *Client) dial(ctx context.Context) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.dialTimeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConnect, err)
	}
	rd := protocol.NewReader(bufio.NewReaderSize(nc, 32<<10), protocol.DefaultReaderLimits)
	if err := c.handshake(ctx, nc, rd); err != nil {
		nc.Close()
		return nil, fmt.Errorf("%w: %s: %w", ErrConnect, c.addr, err)
	}
	cn := newConn(nc, c.addr)
	c.wg.Add(2)
	go func() { defer c.wg.Done(); cn.readLoop(rd) }()
	go func() { defer c.wg.Done(); cn.writeLoop() }()
	return cn, nil
}

// handshake sends HELLO or AUTH, as the options ask, before the connection
// is shared.
func (c *Client) handshake(ctx context.Context, nc net.Conn, rd *protocol.Reader) error {
	var cmd []byte
	switch pw := c.opts.password; {
	case c.opts.protocol == 3 && pw != "":
		cmd = appendArgs(nil, "HELLO", "3", "AUTH", "default", pw)
	case c.opts.protocol == 3:
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

// send runs cmd, which holds n encoded commands, on one connection and
// returns their n replies, error replies included.
func (c *Client) send(ctx context.Context, cmd []byte, n int) ([]Value, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("client: request not sent: %w", err)
	}
	for attempt := 0; ; attempt++ {
		cn, err := c.pick(ctx)
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
		// A connection that broke before writing the request is retried
		// once: nothing was sent, so the command cannot apply twice.
		if !errors.Is(err, ErrConnect) || attempt > 0 {
			return nil, err
		}
	}
}

// one runs a single encoded command and returns its reply, with an error
// reply returned as a *ReplyError.
func (c *Client) one(ctx context.Context, cmd []byte) (Value, error) {
	replies, err := c.send(ctx, cmd, 1)
	if err != nil {
		return Value{}, err
	}
	v := replies[0]
	if v.IsError() {
		return v, &ReplyError{Msg: string(v.Str)}
	}
	return v, nil
}
