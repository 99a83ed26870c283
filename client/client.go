package client

import (
	"context"
	"fmt"
	"slices"
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
	seeds       []string // New's address, then WithSeeds's
	sessions    bool
}

// Defaults of the options.
const (
	DefaultPoolSize    = 2
	DefaultDialTimeout = 5 * time.Second
)

// WithPassword makes every connection AUTH with password (as the user
// "default") before its first command.
func WithPassword(password string) Option { return func(o *options) { o.password = password } }

// WithSeeds adds addresses (host:port) of other members of the cluster
// that New's address belongs to. New connects to the first of them all that
// answers, its own address first; calls that cannot reach a member, or that
// a member turns away, try the others (see Failover in the package doc).
func WithSeeds(addrs ...string) Option {
	return func(o *options) { o.seeds = append(o.seeds, addrs...) }
}

// WithSessions makes the Client send its writes in a client session, so
// that a write it sends again after its connection broke takes effect once
// (see Sessions in the package doc). A server without sessions (Redis, a
// Flint without the replicated log) gets its writes as they are.
func WithSessions() Option { return func(o *options) { o.sessions = true } }

// WithPoolSize sets how many connections the Client keeps to each member
// and spreads calls over (default 2). More connections let the server use
// more cores; fewer let more calls share each write.
func WithPoolSize(n int) Option { return func(o *options) { o.poolSize = n } }

// WithDialTimeout bounds connecting, including AUTH and HELLO (default 5s).
func WithDialTimeout(d time.Duration) Option { return func(o *options) { o.dialTimeout = d } }

// WithProtocol selects RESP2 (2, the default) or RESP3 (3, negotiated with
// HELLO 3 on connect).
func WithProtocol(version int) Option { return func(o *options) { o.protocol = version } }

// Client is a pool of pipelined connections to each member of a cluster,
// or to one server. Its methods may be called from any number of goroutines
// at once.
type Client struct {
	opts   options
	sess   sessions
	closed atomic.Bool
	wg     sync.WaitGroup // the reader and writer of every connection ever opened, and refreshLoop

	// ctx ends when the Client is closed, for the work it does of its own
	// (refreshing the map).
	ctx    context.Context
	cancel context.CancelFunc
	kick   chan struct{} // capacity 1: a token asks refreshLoop for a refresh

	// target is the pool of the member serving slot 0 (see routes), or of
	// the seed New connected to while no route is known. Commands without
	// keys go to it, and so does every command while the map is not
	// sharded. Never nil once New returns. It is stored under mu and loaded
	// without it.
	target atomic.Pointer[pool]
	// table is the routes as calls read them. Never nil once New returns.
	// It is stored under mu and loaded without it.
	table atomic.Pointer[table]

	mu struct {
		sync.Mutex
		routes routes
		// members are the pools of every address known, the seeds' first in
		// the order given, then the learned ones, oldest first. Retries go
		// round them in this order. Invariant: byAddr indexes the same pools;
		// seeds never leave; at most maxLearned learned ones stay.
		members []*pool
		byAddr  map[string]*pool
		seeds   int // how many of members are seeds
		// epoch is that of the latest map learned (Client.learn), 0 while
		// none gave one. Invariant: it never decreases.
		epoch uint64
	}
}

// New connects to the server at addr (host:port), or, given WithSeeds, to
// the first of addr and the seeds that answers: it opens every connection
// of the pool to it, then asks it for CLUSTER SLOTS to learn the cluster's
// map, members and leaders (a server that does not have the command is
// used alone, with the seeds as the members to try if it fails). The error
// wraps ErrConnect if no address can be reached, and a *ReplyError if a
// server refused AUTH or HELLO.
func New(addr string, opts ...Option) (*Client, error) {
	o := options{poolSize: DefaultPoolSize, dialTimeout: DefaultDialTimeout, protocol: 2}
	for _, opt := range opts {
		opt(&o)
	}
	o.seeds = append([]string{addr}, o.seeds...)
	if o.poolSize < 1 || o.dialTimeout <= 0 || (o.protocol != 2 && o.protocol != 3) {
		return nil, fmt.Errorf("client: bad options: pool size %d, dial timeout %v, protocol %d (want >= 1, > 0, 2 or 3)",
			o.poolSize, o.dialTimeout, o.protocol)
	}
	c := &Client{opts: o, kick: make(chan struct{}, 1)}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.sess.mu.bySpan = make(map[span]*sessionSlot)
	c.mu.byAddr = make(map[string]*pool)
	c.table.Store(&table{})
	for _, a := range o.seeds { // no other goroutine has c yet
		if c.mu.byAddr[a] == nil {
			c.addLocked(a)
		}
	}
	c.mu.seeds = len(c.mu.members)
	p, err := c.connect()
	if err != nil {
		c.Close()
		return nil, err
	}
	c.target.Store(p)
	c.discover(p)
	c.wg.Go(c.refreshLoop)
	return c, nil
}

// connect opens every connection of the pool of the first seed that
// answers, and returns that pool. A seed that refuses AUTH or HELLO ends the
// search: the others would refuse the same credentials.
func (c *Client) connect() (*pool, error) {
	var err error
	for _, p := range c.mu.members {
		if err = p.fill(); err == nil {
			return p, nil
		}
		if refusedHandshake(err) {
			return nil, err
		}
	}
	return nil, err
}

// Close closes every connection and waits for their goroutines to exit.
// Calls still waiting fail with ErrClosed, wrapped with ErrUnknownOutcome
// if their requests were written. Closing twice is harmless.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.cancel()
	c.mu.Lock()
	pools := slices.Clone(c.mu.members)
	c.mu.Unlock()
	for _, p := range pools {
		p.close(ErrClosed)
	}
	c.wg.Wait()
	return nil
}

// one runs a single encoded command and returns its reply, with an error
// reply returned as a *ReplyError.
func (c *Client) one(ctx context.Context, cmd []byte) (Value, error) {
	replies, err := c.call(ctx, request{cmd: cmd})
	if err != nil {
		return Value{}, err
	}
	v := replies[0]
	if v.IsError() {
		return v, &ReplyError{Msg: string(v.Str)}
	}
	return v, nil
}
