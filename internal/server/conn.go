package server

import (
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/flintkv/flint/internal/protocol"
	"github.com/flintkv/flint/internal/store"
)

// Sizes of a connection's buffers: initial ones; keepIdle, above which a
// buffer is given back once a batch uses little of it; and readAhead, up to
// which a read that fills the input buffer doubles it for the next read (see
// fill). An input buffer larger than readAhead grew for one large command,
// and is given back once that is done.
const (
	inInitial  = 16 << 10
	outInitial = 16 << 10
	keepIdle   = 64 << 10
	readAhead  = 256 << 10
)

// conn is one client connection. Its fields belong to its goroutine, except
// output's locked fields, shared with the writer goroutine, and info, which
// CLIENT LIST reads from other connections.
type conn struct {
	srv    *Server
	nc     net.Conn
	id     int64
	parser *protocol.Parser
	// prefetchAhead's parser, which looks at commands before parser does,
	// and its arguments.
	lookahead *protocol.Parser
	aheadArgs [][]byte

	in    []byte // unparsed input is in[:inLen]
	inLen int
	// inputShare is how much of the server's MaxInputMemory in holds:
	// what it has beyond readAhead bytes (see input.go).
	inputShare int64
	filled     bool  // the last read filled in: the client may have sent more
	readErr    error // why reading stopped; input already read is still executed
	args       [][]byte
	out        []byte       // replies not yet sent
	lower      [32]byte     // scratch for lower-casing command names
	pairs      []store.Pair // scratch for short ranges
	one        [1]lookup    // scratch for readNow's lookup of one key

	// Writes executed but not yet committed, the replies they get once they
	// are, and the reads pipelined among them: see commit.go, and its
	// invariant on out.
	batch        store.Batch
	replies      []reply        // one per entry of batch
	slots        []int32        // in a group, one per entry of batch: its key's slot, or -1
	deferred     []deferredRead // in order
	dargs        [][]byte       // the deferred reads' arguments, back to back
	deferredKeys int            // keys the deferred reads read
	held         []heldTx       // in order; the last is c.tx's while c.tx.held
	// What Apply's done callback (writeApplied) records, on the backend's
	// goroutine while this one waits in Apply, for this one to reply from
	// once Apply returns.
	results  []store.Result // of the writes reported, in order
	got      []lookup       // what the deferred reads' keys hold, in order
	nextRead int            // the first deferred read not yet looked up
	prefetch [][]byte       // scratch for prefetchReads and prefetchAhead
	applied  func(i int, res store.Result)
	record   func(i int, val []byte, found bool) // c.lookedUp

	barrierOK bool // ReadBarrier succeeded after the last input arrived

	proto protocol.Version
	// readonly is set by READONLY: a follower serves this connection's
	// reads rather than redirecting them to the leader.
	readonly bool
	// asking is set by ASKING, for the command after it; asked is set
	// while that command runs (see moveRoute).
	asking, asked bool
	// keySlot is the slot of the command being run, in a sharded cluster,
	// if it has keys and is routed by them; else -1 (see movedAway).
	keySlot int
	// seq, set by FLINT.SEQ while its command runs, is the OpSeq's
	// arguments that write puts before the command's entry.
	seq    [][]byte
	tx     txState // MULTI, and the keys WATCH watches
	authed bool
	quit   bool // close after sending the replies so far
	// subs are the connection's subscriptions (see pubsub.go).
	subs subscriptions

	// Per-batch counters, added to the server's stats once per batch.
	commands, hits, misses int64
	counts                 []cmdCount // by command, for INFO commandstats

	running     *command   // the command running, for failed_calls
	lastCmd     *command   // the last command executed, for CLIENT LIST
	entryCmds   []*command // the command of each entry of batch; nil for an OpSeq
	commitNanos int64      // time spent in commit, ever
	// Of the time of the batch of input being executed, the part not
	// shared among its writes and simple reads (see cmdstats.go), and
	// whether a command timed alone is running.
	excluded  int64
	timing    bool
	lastWrite uint64 // the log index WAIT waits for (see committed)

	// CLIENT REPLY: replyOff drops every reply but CLIENT REPLY ON's,
	// skipNext the next command's; muted is set while a command's reply
	// is being dropped, and send drops what it is given.
	replyOff, skipNext, muted bool

	output output

	info struct {
		created time.Time
		name    atomic.Pointer[string]
		libName atomic.Pointer[string]
		libVer  atomic.Pointer[string]
		active  atomic.Int64 // unix nanos of the last command
		fd      int
		noEvict atomic.Bool
		// Published by publishInfo once per batch.
		cmd             atomic.Pointer[command]
		qbuf, rbs, obuf atomic.Int64
		resp            atomic.Int32
		readonly        atomic.Bool
		subs            [kinds]atomic.Int32 // subscriptions of each kind
		multi           atomic.Int32        // commands queued in MULTI, or -1
		killed          chan struct{}       // closed by CLIENT KILL
		killOnce        sync.Once
	}
}

func newConn(s *Server, nc net.Conn, id int64) *conn {
	c := &conn{srv: s, nc: nc, id: id, parser: protocol.NewParser(s.lim), lookahead: protocol.NewParser(aheadLimits(s.lim)),
		in: make([]byte, min(inInitial, s.cfg.MaxQueryBuffer)), proto: protocol.RESP2, authed: !s.needPass()}
	if !c.authed {
		c.parser.SetLimits(s.lim.ForUnauthenticated())
	}
	c.output.init(nc, s.closing.Load)
	c.applied, c.record = c.writeApplied, c.lookedUp
	c.info.created = time.Now()
	c.info.active.Store(c.info.created.UnixNano())
	c.info.fd = fdOf(c)
	c.info.killed = make(chan struct{})
	c.publishInfo()
	return c
}

// serve runs the connection until the client leaves, breaks the protocol,
// or the server shuts down; then it delivers the replies still queued and
// closes.
func (c *conn) serve() {
	defer c.srv.forget(c)
	defer c.close()
	for !c.quit && c.readErr == nil && !c.srv.closing.Load() {
		c.fill()
		if err := c.runBatch(); err != nil {
			break
		}
	}
	c.leavePubSub() // no more messages: the output can drain
	c.readFailed()
	c.finishOutput()
}

// How a closing connection lingers. Closing a socket with unread input
// makes the kernel send a reset and drop the output it has not sent yet; so
// a closing connection discards input until the client has taken all of its
// output (the kernel's send queue is empty: a reset then loses nothing, as
// the client's kernel holds it), or closes too. One whose client takes none
// of its output for lingerStall is closed regardless; Shutdown's context
// bounds the whole. lingerStall outlasts a few of TCP's retransmission
// timeouts (200 ms, doubling): on a loaded machine, a segment dropped on
// loopback held a reading client's output up for over a second.
const (
	lingerPoll  = 10 * time.Millisecond // how often the send queue is checked while no input comes
	lingerStall = 5 * time.Second
)

// close closes the connection so that the replies already written reach the
// client; without this, a client that pipelines lost replies to commands
// the server had executed (TestGracefulShutdown), and so did one that took
// more than a second to read them, when the wait was a second at most
// (TestGracefulShutdownSlowReader). It sends FIN after the replies and
// discards input as the const block above says.
func (c *conn) close() {
	defer c.nc.Close()
	tc, ok := c.nc.(*net.TCPConn)
	if !ok || c.output.failed() || tc.CloseWrite() != nil {
		return // no replies to deliver
	}
	last, err := unsent(tc)
	for stall := time.Now().Add(lingerStall); err == nil && last > 0 && time.Now().Before(stall); {
		tc.SetReadDeadline(time.Now().Add(lingerPoll))
		if _, rerr := tc.Read(c.in); rerr != nil && !errors.Is(rerr, os.ErrDeadlineExceeded) {
			return // the client closed too, or the connection failed
		}
		var n int
		if n, err = unsent(tc); n < last {
			last, stall = n, time.Now().Add(lingerStall)
		}
	}
}

// fill reads whatever the client has sent, growing the input buffer when a
// single command does not fit, up to MaxQueryBuffer, and when the last read
// filled it, up to readAhead. A read error is kept in readErr.
//
// The second growth is for pipelines: the writes among the commands a pass
// executes are committed at its end (see execBuffered), so a pipeline read
// in three parts waits for three commits where one read would wait for one,
// each an fsync with fsync on. A pipeline of 1,024 GETs and SETs of the
// 95/5 workload is about 32 KiB, and a client may send several at once.
// consume gives the grown buffer back once the client's pipelines shrink.
func (c *conn) fill() {
	limit := c.inputLimit()
	switch ahead := min(readAhead, limit); {
	case c.inLen == len(c.in):
		if len(c.in) >= limit {
			c.readErr = errQueryBuffer
			return
		}
		if !c.growIn(limit) {
			return
		}
	case c.filled && len(c.in) < ahead:
		c.growIn(ahead)
	}
	if d := time.Duration(c.srv.idleTimeout.Load()); d > 0 {
		c.nc.SetReadDeadline(time.Now().Add(d))
		if c.srv.closing.Load() { // Shutdown's wake-up may have been overwritten
			c.nc.SetReadDeadline(time.Now())
		}
	}
	n, err := c.nc.Read(c.in[c.inLen:])
	c.filled = n > 0 && c.inLen+n == len(c.in)
	c.received(n)
	if n == 0 && errors.Is(err, os.ErrDeadlineExceeded) && !c.srv.closing.Load() && c.output.writing() {
		return // not idle: the client is still taking replies
	}
	if n == 0 {
		c.readErr = err
	}
}

var errQueryBuffer = errors.New("query buffer limit exceeded")

// received accounts for n bytes of input just read. Reads among them need a
// new read barrier (see read).
func (c *conn) received(n int) {
	c.inLen += n
	c.srv.stats.netIn.Add(int64(n))
	if n > 0 {
		c.barrierOK = false
	}
}

// readFailed reports why reading stopped, with a reply where the client
// can act on it.
func (c *conn) readFailed() {
	switch err := c.readErr; {
	case errors.Is(err, errQueryBuffer):
		c.srv.log.Warn("closing client that reached the query buffer limit", "id", c.id,
			"addr", c.nc.RemoteAddr().String(), "limit", c.srv.cfg.MaxQueryBuffer)
		c.out = protocol.AppendError(c.out, "ERR Protocol error: query buffer limit exceeded")
	case errors.Is(err, errInputMemory):
		c.srv.log.Warn("closing client whose command does not fit the input memory left", "id", c.id,
			"addr", c.nc.RemoteAddr().String(), "max-input-memory", c.srv.cfg.MaxInputMemory)
		c.out = protocol.AppendError(c.out, "ERR Protocol error: "+errInputMemory.Error())
	case errors.Is(err, os.ErrDeadlineExceeded) && !c.srv.closing.Load():
		c.srv.log.Info("closing idle client", "id", c.id, "addr", c.nc.RemoteAddr().String())
	}
}

// runBatch executes every complete command in the input buffer and sends
// all the replies. Input that arrives while it waits for replies to drain
// is executed too, before it returns. It returns an error when the
// connection must close.
func (c *conn) runBatch() error {
	for {
		perr := c.execBuffered()
		before := c.inLen
		if err := c.flush(); err != nil {
			return err
		}
		if perr != nil || c.quit || c.inLen == before {
			return perr
		}
	}
}

// execBuffered executes the complete commands in the input buffer, commits
// the writes among them, and consumes them. It returns the protocol error
// that stopped it, if any, after appending its reply.
func (c *conn) execBuffered() error {
	start := time.Now()
	off, aheadEnd := 0, 0
	var perr error
	for !c.quit {
		if off >= aheadEnd && c.batch.Len() == 0 && c.authed {
			aheadEnd = off + c.prefetchAhead(c.in[off:c.inLen])
		}
		args, n, err := c.parser.Next(c.in[off:c.inLen], c.args)
		c.args = args
		if err != nil {
			if err != protocol.ErrIncomplete {
				perr = err
			}
			break
		}
		off += n
		if len(args) > 0 {
			c.exec(args)
		}
	}
	c.commit()
	c.shareTime(time.Since(start).Nanoseconds())
	c.consume(off)
	c.publishStats()
	if perr != nil {
		c.out = protocol.AppendError(c.out, "ERR "+perr.Error())
		c.srv.errors.add("ERR")
		c.quit = true
	}
	return perr
}

// consume drops the first n bytes of input, and gives back the buffer
// (for one of inInitial bytes, if what is left fits) when it grew for a
// large command, or when it grew past keepIdle for pipelines and this pass
// used less than inInitial of it: the client's pipelines are shorter now.
// The threshold is fixed, not a share of the buffer, so that pipelines of
// about the same size keep the buffer they made grow.
func (c *conn) consume(n int) {
	rest := c.inLen - n
	if n > 0 {
		copy(c.in, c.in[n:c.inLen])
	}
	c.inLen = rest
	if l := len(c.in); rest <= inInitial && (l > readAhead || (l > keepIdle && n < inInitial)) {
		c.resizeIn(inInitial)
	}
	if cap(c.args) > maxKeptArgs {
		c.args = nil // a command of very many arguments is done
	}
}

func (c *conn) publishStats() {
	if c.commands == 0 {
		return
	}
	st := &c.srv.stats
	st.commands.Add(c.commands)
	if c.hits > 0 {
		st.hits.Add(c.hits)
	}
	if c.misses > 0 {
		st.misses.Add(c.misses)
	}
	c.commands, c.hits, c.misses = 0, 0, 0
	c.publishCounts()
	c.publishInfo()
	c.info.active.Store(time.Now().UnixNano())
}

// flush sends the buffered replies and, if more than MaxOutputBuffer bytes
// are then waiting for the client, waits for them to drain (reading input
// meanwhile). An error means the connection's output is broken.
func (c *conn) flush() error {
	if err := c.send(c.out); err != nil {
		c.quit = true
		return err
	}
	c.out = c.reuseOut(len(c.out))
	if c.output.backlog() > c.srv.cfg.MaxOutputBuffer {
		waited := time.Now()
		err := c.waitDrain()
		c.excluded += time.Since(waited).Nanoseconds()
		if err != nil {
			c.quit = true
			return err
		}
	}
	return nil
}

// reuseOut returns the reply buffer emptied for the next batch, given how
// much the last one used. A buffer up to twice MaxOutputBuffer is kept while
// batches use a good part of it, since regrowing it each batch costs more
// than the copying it saves (a pipeline of RANGE replies reallocated about
// 1 MB per batch and spent a third of the server's CPU in the collector);
// one the last batch hardly used is given back.
func (c *conn) reuseOut(used int) []byte {
	if n := cap(c.out); n > 2*c.srv.cfg.MaxOutputBuffer || (n > keepIdle && used < n/8) {
		return make([]byte, 0, outInitial)
	}
	return c.out[:0]
}

// maybeFlush flushes once the reply buffer reaches MaxOutputBuffer.
func (c *conn) maybeFlush() {
	if len(c.out) >= c.srv.cfg.MaxOutputBuffer {
		c.flush()
	}
}

// writeLarge appends a bulk string, sending a large one straight from val so
// that it is not copied into the reply buffer.
func (c *conn) writeLarge(val []byte) {
	// A subscriber's messages may be queued at any moment: they must not
	// come between the header and the value.
	if len(val) < c.srv.cfg.MaxOutputBuffer || c.subs.any() {
		c.out = protocol.AppendBulk(c.out, val)
		c.maybeFlush()
		return
	}
	c.out = protocol.AppendBulkHeader(c.out, len(val))
	if c.flush() != nil || c.send(val) != nil {
		c.quit = true
		return
	}
	c.out = append(c.out, '\r', '\n')
}

// send passes b to the socket if it takes all of it at once, and queues
// what it does not take for the writer goroutine. b may be reused on return.
func (c *conn) send(b []byte) error {
	if len(b) == 0 || c.muted {
		return nil
	}
	o := &c.output
	if !o.claim() {
		return o.enqueue(c, b)
	}
	n, err := o.tryWrite(b)
	c.srv.stats.netOut.Add(int64(n))
	if err != nil {
		o.release(c, nil)
		o.fail(err)
		return err
	}
	return o.release(c, b[n:])
}

// waitDrain returns once at most MaxOutputBuffer bytes wait for the client.
// Meanwhile it reads input, so that a client that writes a long pipeline
// before reading any reply is not deadlocked against a server that stopped
// reading; the input is executed once the replies drain. When the query
// buffer is full too, it only waits: memory stays bounded, and a client
// that reads nothing is dropped after OutputTimeout.
func (c *conn) waitDrain() error {
	o := &c.output
	limit := c.srv.cfg.MaxOutputBuffer
	for {
		readable := c.readErr == nil && c.inLen < c.inputLimit()
		drained, err := o.waitBelow(limit, readable)
		if err != nil || drained {
			return err
		}
		c.readWhileBlocked()
	}
}

// readWhileBlocked reads more input while replies are backed up. Unlike
// fill it leaves the read deadline to the writer, which moves it to now to
// interrupt this read when the backlog drains.
func (c *conn) readWhileBlocked() {
	if c.inLen == len(c.in) && !c.growIn(c.inputLimit()) {
		return
	}
	n, err := c.nc.Read(c.in[c.inLen:])
	c.received(n)
	interrupted := c.output.endRead()
	if n == 0 && !(interrupted && errors.Is(err, os.ErrDeadlineExceeded)) {
		c.readErr = err
	}
}

// finishOutput waits until every queued reply was written or the output
// failed.
func (c *conn) finishOutput() {
	c.send(c.out)
	c.out = nil
	c.output.finish()
}

// rawConnOf returns the connection's descriptor access, if it has one.
func rawConnOf(nc net.Conn) syscall.RawConn {
	if sc, ok := nc.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			return rc
		}
	}
	return nil
}
