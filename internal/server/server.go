// Package server accepts Redis-protocol connections and executes their
// commands against a Backend.
//
// Each connection has one goroutine. It reads everything the client has sent,
// parses the whole batch, executes the commands in order and writes all their
// replies with one write, so a pipelining client costs one read and one write
// per batch rather than per command. Consecutive writes go to the Backend
// together, as one batch (group commit within a connection), and the reads
// of a batch of input share one read barrier. Replies leave in the order the
// commands came. Commands on different connections run in parallel on every core; the
// store below decides what they contend on.
//
// Every buffer a connection owns is bounded by Config. Replies go straight
// to the socket while it takes them; what it does not take waits for a
// writer goroutine, and once more than MaxOutputBuffer bytes wait, the
// connection stops executing commands but goes on reading input, up to
// MaxQueryBuffer. So a client that writes a long pipeline before reading
// any reply (as go-redis does) is never deadlocked, and a client that reads
// nothing costs at most those two buffers (queued replies can reach about
// twice MaxOutputBuffer plus one reply) and is dropped after OutputTimeout
// without progress. Pub/sub messages, which other connections deliver to a
// subscriber's writer, cannot wait: a subscriber with more than
// MaxPubSubOutput bytes queued is dropped (pubsub.go). Input is bounded per
// connection and across all of them (input.go).
package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/flintkv/flint/internal/protocol"
	"github.com/flintkv/flint/internal/store"
)

// Config is the server's configuration. Zero fields take the defaults of
// DefaultConfig.
type Config struct {
	Addr            string        // listen address
	RequirePass     string        // password of the default user; empty: no AUTH needed
	MaxClients      int           // most connections open at once
	MaxBulk         int           // longest bulk string argument, bytes
	MaxArgs         int           // most arguments in one command
	MaxInline       int           // longest inline command, bytes
	MaxQueryBuffer  int           // most unparsed input buffered per connection, bytes
	MaxInputMemory  int           // most bytes all connections' input buffers hold beyond 256 KiB each (see input.go)
	MaxOutputBuffer int           // reply bytes buffered per connection before writing them out
	OutputTimeout   time.Duration // drop a client that accepts no output for this long
	MaxPubSubOutput int           // drop a subscriber with more output than this waiting, bytes
	IdleTimeout     time.Duration // drop a client idle for this long; 0: never
	// ExpireDelay is how long after its deadline an expired key is
	// removed at most, give or take a commit (see expirer.go).
	ExpireDelay time.Duration
	Logger      *slog.Logger
}

// DefaultConfig holds the defaults.
var DefaultConfig = Config{
	Addr:            "127.0.0.1:7379",
	MaxClients:      10000,
	MaxBulk:         protocol.DefaultLimits.MaxBulk,
	MaxArgs:         protocol.DefaultLimits.MaxArgs,
	MaxInline:       protocol.DefaultLimits.MaxInline,
	MaxQueryBuffer:  1 << 30,
	MaxInputMemory:  2 << 30,
	MaxOutputBuffer: 1 << 20,
	OutputTimeout:   60 * time.Second,
	MaxPubSubOutput: 32 << 20, // Redis's default hard limit for pubsub clients
	ExpireDelay:     100 * time.Millisecond,
}

func (c Config) withDefaults() Config {
	d := DefaultConfig
	setDefault(&c.Addr, d.Addr)
	setDefault(&c.MaxClients, d.MaxClients)
	setDefault(&c.MaxBulk, d.MaxBulk)
	setDefault(&c.MaxArgs, d.MaxArgs)
	setDefault(&c.MaxInline, d.MaxInline)
	setDefault(&c.MaxQueryBuffer, d.MaxQueryBuffer)
	setDefault(&c.MaxInputMemory, max(d.MaxInputMemory, c.MaxQueryBuffer))
	setDefault(&c.MaxOutputBuffer, d.MaxOutputBuffer)
	setDefault(&c.OutputTimeout, d.OutputTimeout)
	setDefault(&c.MaxPubSubOutput, d.MaxPubSubOutput)
	setDefault(&c.ExpireDelay, d.ExpireDelay)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func setDefault[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}

// Backend is what commands run against: Local applies batches to a store
// directly, replica.Replica proposes them to a raft group.
//
// A connection hands its pipelined writes to Apply together, as one batch,
// with the simple reads pipelined among them, whose keys Apply's done
// callback looks up at their place between the writes; and it calls
// ReadBarrier once per batch of input that contains other reads (see
// conn.read). So a slow Apply or ReadBarrier costs a pipelining client once
// per pipeline rather than once per command. done only records results
// and lookups: it never formats a reply or waits for a client, so the
// goroutine that calls it spends little on each connection (see commit.go).
type Backend interface {
	// Apply makes the entries of an encoded batch (see store.Batch) take
	// effect in order and returns once they are durable and applied to
	// Store. Right after entry i takes effect, and before the next one
	// does, it calls done(i, result), on a goroutine of its choosing, while
	// the caller waits. It does not retain batch. An error means the
	// entries done was not called for may or may not take effect; it is
	// reported to the client for each of them.
	//
	// If ctx ends, Apply returns with an error at once, after which done is
	// not called. Errors are those of package replica (see errorReply).
	Apply(ctx context.Context, batch []byte, done func(i int, res store.Result)) error
	// ReadBarrier returns once Store reflects every write acknowledged
	// before the call, making the reads that follow linearizable; or, with
	// an error, once ctx ends first.
	ReadBarrier(ctx context.Context) error
	// Store is the state machine that reads are served from. A backend
	// that replaces it with another calls Replaced on the old one.
	Store() *store.Store
}

// Local is the Backend of a single node without a log: writes apply to the
// store at once, and every read already sees them.
type Local struct{ S *store.Store }

// Apply applies batch to the store, stamped with this process's clock
// (and no log index), which judges keys' deadlines.
func (l Local) Apply(_ context.Context, batch []byte, done func(i int, res store.Result)) error {
	return l.S.ApplyBatchAt(batch, store.Stamp{Time: time.Now().UnixNano()}, done)
}

// ReadBarrier returns at once: applied writes are visible to every reader.
func (l Local) ReadBarrier(context.Context) error { return nil }

// Store returns the store.
func (l Local) Store() *store.Store { return l.S }

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("server: closed")

// Server serves one Backend to many connections.
type Server struct {
	cfg     Config
	kv      Backend
	cluster Cluster // kv, if it is a member of a replicated group
	sharded Sharded // kv, if its group is one of a sharded cluster's
	log     *slog.Logger
	start   time.Time
	lim     protocol.Limits

	stale staleView // only with the injected bug bugs.StaleRead

	// ctx is what the backend's calls wait under: Shutdown cancels it
	// once its own context ends, so that no connection waits any longer.
	ctx    context.Context
	cancel context.CancelFunc
	// stopping is closed when Shutdown begins: it ends the waits of WAIT
	// and CLIENT PAUSE.
	stopping     chan struct{}
	stoppingOnce sync.Once

	nextID  atomic.Int64
	closing atomic.Bool
	stats   stats
	hub     *hub // subscriptions
	// inputUsed is how much of MaxInputMemory connections hold (see
	// input.go). Invariant: inputUsed <= MaxInputMemory.
	inputUsed atomic.Int64
	fwd       forwarder // to the cluster's other nodes, of what is published here

	cmdStats []cmdStats // by command id
	errors   errorStats
	slowlog  slowlog
	paused   atomic.Bool // a CLIENT PAUSE may be in force: see pause
	pause    pause
	// The settings CONFIG SET changes (see config.go).
	maxClients  atomic.Int64
	idleTimeout atomic.Int64             // nanoseconds; 0: never
	pass        atomic.Pointer[password] // nil: none
	// position is kv's, if it tells where its log is (see WAIT).
	position Positioner

	mu struct {
		sync.Mutex
		ln    net.Listener
		conns map[int64]*conn
	}
	wg sync.WaitGroup // one per open connection, and one for the expirer while it runs
}

// stats are server-wide counters, updated once per batch.
type stats struct {
	connections atomic.Int64 // accepted, ever
	rejected    atomic.Int64 // refused for MaxClients
	commands    atomic.Int64
	hits        atomic.Int64
	misses      atomic.Int64
	netIn       atomic.Int64
	netOut      atomic.Int64
}

// New returns a Server for kv.
func New(cfg Config, kv Backend) *Server {
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, kv: kv, log: cfg.Logger, start: time.Now(),
		lim: protocol.Limits{MaxBulk: cfg.MaxBulk, MaxArgs: cfg.MaxArgs, MaxInline: cfg.MaxInline}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.stopping = make(chan struct{})
	s.hub = newHub()
	s.fwd.srv = s
	s.cluster, _ = kv.(Cluster)
	s.sharded, _ = kv.(Sharded)
	s.position, _ = kv.(Positioner)
	s.setPass(cfg.RequirePass)
	s.maxClients.Store(int64(cfg.MaxClients))
	s.idleTimeout.Store(int64(cfg.IdleTimeout))
	s.cmdStats = make([]cmdStats, len(allCommands))
	s.slowlog.init()
	s.mu.conns = make(map[int64]*conn)
	return s
}

// password is the default user's password, and its hash.
type password struct {
	plain string // for CONFIG GET requirepass, as Redis shows it
	sum   [sha256.Size]byte
}

// setPass sets the default user's password; empty: none is needed.
func (s *Server) setPass(pass string) {
	if pass == "" {
		s.pass.Store(nil)
		return
	}
	s.pass.Store(&password{plain: pass, sum: sha256.Sum256([]byte(pass))})
}

// needPass reports whether clients must authenticate.
func (s *Server) needPass() bool { return s.pass.Load() != nil }

// checkPass compares in constant time, hashing first so that the length of
// the password does not leak either. With no password set, any matches.
func (s *Server) checkPass(pass []byte) bool {
	want := s.pass.Load()
	if want == nil {
		return true
	}
	sum := sha256.Sum256(pass)
	return subtle.ConstantTimeCompare(sum[:], want.sum[:]) == 1
}

// ListenAndServe listens on cfg.Addr and serves until Shutdown.
func (s *Server) ListenAndServe() error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return err
	}
	return s.Serve(ln)
}

// Serve accepts connections on ln until Shutdown. It always returns an
// error: ErrServerClosed after Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.mu.ln = ln
	s.wg.Add(1)
	go s.expire()
	s.mu.Unlock()
	s.log.Info("serving", "addr", ln.Addr().String())
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) {
				// Out of descriptors or similar: back off and retry.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed; retrying", "err", err, "delay", delay)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		s.accept(nc)
	}
}

func (s *Server) accept(nc net.Conn) {
	s.stats.connections.Add(1)
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		nc.Close()
		return
	}
	if int64(len(s.mu.conns)) >= s.maxClients.Load() {
		s.mu.Unlock()
		s.stats.rejected.Add(1)
		nc.SetWriteDeadline(time.Now().Add(time.Second))
		nc.Write([]byte("-ERR max number of clients reached\r\n"))
		nc.Close()
		return
	}
	c := newConn(s, nc, s.nextID.Add(1))
	s.mu.conns[c.id] = c
	s.wg.Add(1)
	s.mu.Unlock()
	go c.serve()
}

func (s *Server) forget(c *conn) {
	c.releaseInput()
	s.mu.Lock()
	delete(s.mu.conns, c.id)
	s.mu.Unlock()
	s.wg.Done()
}

// Addr returns the listening address, or nil before Serve.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.ln == nil {
		return nil
	}
	return s.mu.ln.Addr()
}

// Shutdown stops accepting, lets every connection finish the batch it is
// executing and write its replies, then closes them. It returns when all are
// closed or ctx ends, in which case the rest are closed at once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closing.Store(true)
	s.stoppingOnce.Do(func() { close(s.stopping) })
	s.fwd.stop()
	s.mu.Lock()
	if s.mu.ln != nil {
		s.mu.ln.Close()
	}
	for _, c := range s.mu.conns {
		c.nc.SetReadDeadline(time.Now()) // wake readers; writers finish the batch
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.cancel()
		s.mu.Lock()
		for _, c := range s.mu.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
		<-done
		return ctx.Err()
	}
}
