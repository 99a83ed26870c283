package transport

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"sync"

	"go.etcd.io/raft/v3/raftpb"
)

// Handler receives what peers send, and what became of what this node sent.
// Its methods are called only from the transport's goroutines, never from
// within Send or SendSnapshot, possibly concurrently: Receive concurrently
// for different sending nodes, but one call at a time, in order, for the
// messages of one connection (when a node reconnects, the last call for its
// old connection may overlap the first for the new one). Close waits for
// the calls in progress.
type Handler interface {
	// Receive takes raft messages of one group sent by node from, in the
	// order that node sent them on its connection; msgs is the handler's to
	// keep (it aliases no buffer of the transport). It must not block long:
	// the connection's next frames wait for it.
	Receive(from, group uint64, msgs []raftpb.Message)
	// ReceiveSnapshot takes one snapshot stream: m is the MsgSnap
	// (m.Snapshot.Data is whatever small metadata the sender put there),
	// body the snapshot's bytes, verified chunk by chunk: a Read error other
	// than io.EOF means the stream broke or was corrupt, and the snapshot
	// must be discarded. It may take long (it writes a file); its error is
	// reported back to the sender. Returning nil before body returned io.EOF
	// is reported to the sender as an error.
	ReceiveSnapshot(from, group uint64, m raftpb.Message, body io.Reader) error
	// Unreachable says messages of group for node to were dropped (queue
	// full, not connected): raft's ReportUnreachable. Drops between two
	// calls for the same node and group are reported once.
	Unreachable(to, group uint64)
	// SnapshotDone ends a SendSnapshot: err is nil once the receiver's
	// ReceiveSnapshot returned nil.
	SnapshotDone(to, group uint64, err error)
}

// Sender is what the raft glue uses; *Transport and the in-memory test
// network (package transporttest) implement it.
type Sender interface {
	// Send queues msgs of group for node to. It never blocks: a full queue,
	// or a peer not connected, drops them and reports Unreachable. The
	// caller does not modify msgs after.
	Send(to, group uint64, msgs []raftpb.Message)
	// SendSnapshot streams body, size bytes, to node to after m (a MsgSnap)
	// on a connection of its own. It never blocks; the stream ends with
	// Handler.SnapshotDone, and body is closed.
	SendSnapshot(to, group uint64, m raftpb.Message, body io.ReadCloser, size int64)
}

// Config configures a Transport.
type Config struct {
	NodeID, ClusterID uint64
	// Secret is the cluster secret: peers prove they know it (HMAC
	// challenge-response); it is never sent. Use 32 random bytes.
	Secret []byte
	// Listener is where peer connections arrive; Close closes it.
	Listener net.Listener
	// Advertise is this node's peer address as its peers know it, which
	// its hellos carry, so that a peer that knows no address for it can
	// answer (see SetPeer); empty: none is sent. At most 255 bytes.
	Advertise string
	Handler   Handler
	Logger    *slog.Logger // nil discards
	// MaxFrameBytes is the largest frame payload accepted after
	// authentication, and the largest this node writes: default 1 GiB (one
	// raft entry can be about 520 MiB). Before authentication the limit is
	// 4 KiB.
	MaxFrameBytes int
	// QueueMessages and QueueBytes bound each peer's send queue: default
	// 4096 messages and 64 MiB. A Send into an empty queue is taken
	// whatever its size.
	QueueMessages int
	QueueBytes    int
	// MaxSnapshots bounds the snapshot streams sent at once (more wait
	// their turn) and received at once (more are refused): default 4 each.
	MaxSnapshots int
}

// Defaults of Config's limits.
const (
	DefaultMaxFrameBytes = 1 << 30
	DefaultQueueMessages = 4096
	DefaultQueueBytes    = 64 << 20
	DefaultMaxSnapshots  = 4
)

// maxPendingHandshakes bounds the connections not yet authenticated: more
// are closed at once.
const maxPendingHandshakes = 64

// Transport carries raft messages and snapshots between this node and its
// peers: one outgoing connection per peer for messages, one per snapshot
// stream. Its methods are safe for concurrent use.
type Transport struct {
	cfg    Config
	log    *slog.Logger
	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine the transport started
	notify *notifier

	pending   chan struct{} // a slot per connection in its handshake
	sendSnaps chan struct{} // a slot per snapshot being sent
	recvSnaps chan struct{} // a slot per snapshot being received

	mu struct {
		sync.Mutex
		closed  bool
		peers   map[uint64]*peer
		inbound map[uint64]net.Conn // each node's latest messages connection to us
	}
	closeErr  error
	closeOnce sync.Once
}

// New starts a transport: it accepts peer connections on cfg.Listener at
// once, and connects to peers as SetPeer names them.
func New(cfg Config) (*Transport, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	t := &Transport{
		cfg:       cfg,
		log:       cfg.Logger.With("node", cfg.NodeID),
		notify:    newNotifier(),
		pending:   make(chan struct{}, maxPendingHandshakes),
		sendSnaps: make(chan struct{}, cfg.MaxSnapshots),
		recvSnaps: make(chan struct{}, cfg.MaxSnapshots),
	}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	t.mu.peers = make(map[uint64]*peer)
	t.mu.inbound = make(map[uint64]net.Conn)
	t.spawn(func() { t.notify.run(t.ctx, cfg.Handler) })
	t.spawn(t.accept)
	return t, nil
}

// fill checks c and sets the defaults of its zero fields.
func (c *Config) fill() error {
	if len(c.Advertise) > maxAddr {
		return fmt.Errorf("transport: advertised address of %d bytes, the limit is %d", len(c.Advertise), maxAddr)
	}
	switch {
	case c.NodeID == 0:
		return fmt.Errorf("%w: node id 0", ErrConfig)
	case len(c.Secret) == 0:
		return fmt.Errorf("%w: no cluster secret", ErrConfig)
	case c.Listener == nil || c.Handler == nil:
		return fmt.Errorf("%w: a listener and a handler are needed", ErrConfig)
	case c.MaxFrameBytes < 0 || c.QueueMessages < 0 || c.QueueBytes < 0 || c.MaxSnapshots < 0:
		return fmt.Errorf("%w: a negative limit", ErrConfig)
	case c.MaxFrameBytes > math.MaxUint32:
		return fmt.Errorf("%w: MaxFrameBytes %d is over a frame's largest length, %d", ErrConfig, c.MaxFrameBytes, uint32(math.MaxUint32))
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.MaxFrameBytes = or(c.MaxFrameBytes, DefaultMaxFrameBytes)
	c.QueueMessages = or(c.QueueMessages, DefaultQueueMessages)
	c.QueueBytes = or(c.QueueBytes, DefaultQueueBytes)
	c.MaxSnapshots = or(c.MaxSnapshots, DefaultMaxSnapshots)
	return nil
}

// or returns v, or def if v is zero.
func or(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// spawn runs f on a goroutine that Close waits for, and reports whether it
// did: not once the transport is closed.
func (t *Transport) spawn(f func()) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.spawnLocked(f)
}

// spawnLocked is spawn with t.mu held. Adding to t.wg under the lock, only
// while the transport is open, orders every Add before Close's Wait.
func (t *Transport) spawnLocked(f func()) bool {
	if t.mu.closed {
		return false
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		f()
	}()
	return true
}

// closeWithTransport closes c when the transport closes, unless the
// returned function is called first.
func (t *Transport) closeWithTransport(c io.Closer) (stop func() bool) {
	return context.AfterFunc(t.ctx, func() { c.Close() })
}

// Close stops accepting connections, closes every connection, and returns
// once every goroutine the transport started has ended (and with them the
// Handler calls in progress). Messages still queued are dropped without
// being reported. A snapshot sender blocked in a Read of its body is waited
// for. Later calls return what the first returned. Send and SendSnapshot
// after Close drop what they are given (SendSnapshot closes its body) and
// report nothing.
func (t *Transport) Close() error {
	t.closeOnce.Do(func() {
		t.mu.Lock()
		t.mu.closed = true
		t.mu.Unlock()
		t.closeErr = t.cfg.Listener.Close()
		t.cancel()
		t.wg.Wait()
	})
	return t.closeErr
}
