package server

import (
	"errors"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// output is a connection's path to the socket. The connection's goroutine
// writes replies itself while the socket takes them without blocking, which
// is the common case and costs one system call per batch. What the socket
// does not take is queued for a writer goroutine, started on first need, so
// that the connection's goroutine never blocks on a client that is slow to
// read: it goes on reading that client's input (see conn.waitDrain).
//
// Other connections' goroutines add pub/sub messages (deliver), always to
// the writer's queue, so the connection's goroutine claims the socket
// before it writes itself, and puts back in front of the queue what the
// socket did not take.
type output struct {
	nc       net.Conn
	closing  func() bool           // whether the server is shutting down
	raw      syscall.RawConn       // nil: every write goes through the writer goroutine
	try      attempt               // the connection's goroutine's, in tryWrite
	writeNow func(fd uintptr) bool // o.writeTry, made once
	cond     *sync.Cond            // on mu: signals queued bytes, progress and failure

	timeout time.Duration // writer: drop a client that accepts nothing for this long
	onBytes func(n int)   // counts bytes written, for INFO

	mu struct {
		sync.Mutex
		// Invariant: busy is false only when pending is empty and the writer
		// holds no bytes; while busy, only the writer writes to the socket,
		// and only while trying is false.
		pending  []byte
		spare    []byte // the writer's drained buffer, reused for pending
		inflight int    // bytes the writer took and has not yet written
		busy     bool
		trying   bool  // the connection's goroutine is writing (tryWrite): the writer waits
		started  bool  // the writer goroutine exists
		closed   bool  // no more bytes will be queued: exit once drained
		err      error // first write failure: the output is dead

		// The connection's goroutine is in a read that the writer must
		// interrupt once the backlog is below wakeBelow.
		wantWake    bool
		wakeBelow   int
		interrupted bool // the writer moved the read deadline to wake it
	}
}

// writeChunk is the most the writer passes to one Write, so that its
// deadline measures progress rather than the time to write everything.
const writeChunk = 256 << 10

func (o *output) init(nc net.Conn, closing func() bool) {
	o.nc, o.closing = nc, closing
	o.raw = rawConnOf(nc)
	o.writeNow = o.writeTry
	o.cond = sync.NewCond(&o.mu)
}

// claim reports whether the socket is free for the connection's goroutine,
// and if so reserves it for a tryWrite, until release.
func (o *output) claim() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.mu.trying = !o.mu.busy && o.mu.err == nil
	return o.mu.trying
}

// release ends a claim. rest, what tryWrite did not write, goes to the
// front of the writer's queue, before any message delivered meanwhile.
func (o *output) release(c *conn, rest []byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.mu.trying = false
	o.cond.Broadcast()
	if len(rest) == 0 || o.mu.err != nil {
		return o.mu.err
	}
	if len(o.mu.pending) == 0 {
		return o.enqueueLocked(c, rest)
	}
	// Messages came during the claim: the writer is started and busy.
	o.mu.pending = append(append(make([]byte, 0, len(rest)+len(o.mu.pending)), rest...), o.mu.pending...)
	return nil
}

// backlog returns how many bytes wait for the writer.
func (o *output) backlog() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.backlogLocked()
}

func (o *output) backlogLocked() int { return len(o.mu.pending) + o.mu.inflight }

// tryWrite writes as much of b as the socket takes without blocking. Only
// the connection's goroutine calls it.
func (o *output) tryWrite(b []byte) (int, error) {
	if o.raw == nil {
		return 0, nil
	}
	o.try = attempt{b: b}
	err := o.raw.Write(o.writeNow)
	n, werr := o.try.n, o.try.err
	o.try = attempt{}
	if err == nil {
		err = werr
	}
	return n, err
}

// attempt is the state of one tryWrite, kept in output so that the function
// it passes the socket, made once, need not capture it: a closure made for
// each write would be allocated for each.
type attempt struct {
	b   []byte
	n   int
	err error
}

// writeTry writes o.try.b to fd until the socket would block. It never asks
// to wait for the socket.
func (o *output) writeTry(fd uintptr) bool {
	t := &o.try
	for t.n < len(t.b) {
		m, err := syscall.Write(int(fd), t.b[t.n:])
		if m > 0 {
			t.n += m
		}
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return true
		case err != nil:
			t.err = os.NewSyscallError("write", err)
			return true
		case m == 0:
			return true
		}
	}
	return true
}

// enqueue copies b to the writer's queue.
func (o *output) enqueue(c *conn, b []byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.enqueueLocked(c, b)
}

func (o *output) enqueueLocked(c *conn, b []byte) error {
	if o.mu.err != nil {
		return o.mu.err
	}
	if o.mu.pending == nil {
		o.mu.pending, o.mu.spare = o.mu.spare[:0], nil
	}
	o.mu.pending = append(o.mu.pending, b...)
	o.mu.busy = true
	if !o.mu.started {
		o.mu.started = true
		o.timeout = c.srv.cfg.OutputTimeout
		o.onBytes = func(n int) { c.srv.stats.netOut.Add(int64(n)) }
		go o.writeLoop(c)
	}
	o.cond.Broadcast()
	return nil
}

// deliver queues a pub/sub message for c, this output's connection, from
// any goroutine. A subscriber that has more than limit bytes waiting is
// too slow to keep up: its output fails and its connection is closed, as
// Redis does past client-output-buffer-limit pubsub. It reports whether
// the message was queued.
func (o *output) deliver(c *conn, msg []byte, limit int) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.mu.err != nil {
		return false
	}
	if o.backlogLocked()+len(msg) > limit {
		c.srv.log.Warn("closing subscriber that reached the pub/sub output limit", "id", c.id,
			"addr", c.nc.RemoteAddr().String(), "limit", limit)
		o.failLocked(errPubSubLimit)
		c.nc.Close() // wakes its goroutine, which is reading
		return false
	}
	o.enqueueLocked(c, msg)
	return true
}

var errPubSubLimit = errors.New("pub/sub output limit exceeded")

// fail records the first write failure.
func (o *output) fail(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failLocked(err)
}

func (o *output) failLocked(err error) {
	if o.mu.err == nil {
		o.mu.err = err
	}
	o.mu.pending = nil
	o.cond.Broadcast()
	o.wakeLocked()
}

// writeLoop writes queued bytes until the connection closes and the queue
// is empty, or a write fails.
func (o *output) writeLoop(c *conn) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for {
		for (len(o.mu.pending) == 0 || o.mu.trying) && o.mu.err == nil && !o.mu.closed {
			if len(o.mu.pending) == 0 {
				o.nc.SetWriteDeadline(time.Time{}) // the socket goes back to tryWrite
				o.mu.busy = false
				o.cond.Broadcast()
				o.wakeLocked()
			}
			o.cond.Wait()
		}
		if o.mu.err != nil || len(o.mu.pending) == 0 {
			o.mu.busy = false
			o.cond.Broadcast()
			return
		}
		buf := o.mu.pending
		o.mu.pending, o.mu.inflight = nil, len(buf)
		o.mu.Unlock()
		err := o.writeAll(buf)
		o.mu.Lock()
		o.mu.inflight = 0
		if cap(buf) <= 4*writeChunk {
			o.mu.spare = buf[:0]
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				c.srv.log.Warn("closing client that does not read its replies", "id", c.id,
					"addr", c.nc.RemoteAddr().String(), "timeout", o.timeout)
			}
			o.failLocked(err)
			return
		}
		o.cond.Broadcast()
		o.wakeLocked()
	}
}

// writeAll writes buf in chunks, each with OutputTimeout to make progress.
func (o *output) writeAll(buf []byte) error {
	for len(buf) > 0 {
		o.nc.SetWriteDeadline(time.Now().Add(o.timeout))
		n, err := o.nc.Write(buf[:min(len(buf), writeChunk)])
		o.onBytes(n)
		if err != nil {
			return err
		}
		buf = buf[n:]
	}
	return nil
}

// wakeLocked interrupts the connection's read if it waits for the backlog
// to drain below its mark, or for a failure.
func (o *output) wakeLocked() {
	if o.mu.wantWake && (o.backlogLocked() <= o.mu.wakeBelow || o.mu.err != nil) {
		o.mu.wantWake = false
		o.mu.interrupted = true
		o.nc.SetReadDeadline(time.Now())
	}
}

// waitBelow returns true once the backlog is at most limit. If it is not,
// and readable, it returns false at once, having arranged for the read the
// caller makes next to be interrupted when the backlog gets there; if not
// readable it waits.
func (o *output) waitBelow(limit int, readable bool) (bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for {
		if o.mu.err != nil {
			return false, o.mu.err
		}
		if o.backlogLocked() <= limit {
			return true, nil
		}
		if readable {
			// No idle timeout while replies are still going out: a client
			// reading a large reply slowly is not idle, and OutputTimeout
			// bounds one that reads nothing. The deadline is set under the
			// lock, so it cannot erase the writer's interrupt.
			o.restoreDeadlineLocked()
			o.mu.wantWake, o.mu.wakeBelow = true, limit
			return false, nil
		}
		o.cond.Wait()
	}
}

// restoreDeadlineLocked clears the read deadline, or moves it to now if the
// server is closing so that Shutdown's wake-up is not undone.
func (o *output) restoreDeadlineLocked() {
	o.nc.SetReadDeadline(time.Time{})
	if o.closing() {
		o.nc.SetReadDeadline(time.Now())
	}
}

// endRead ends a read begun after waitBelow. It reports whether the writer
// interrupted it, and then restores the read deadline.
func (o *output) endRead() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.mu.wantWake = false
	if !o.mu.interrupted {
		return false
	}
	o.mu.interrupted = false
	o.restoreDeadlineLocked()
	return true
}

// failed reports whether a write failed: no more output reaches the client.
func (o *output) failed() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.mu.err != nil
}

// writing reports whether the writer goroutine is delivering replies: the
// client is then taking output, not idle.
func (o *output) writing() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.mu.busy && o.mu.err == nil
}

// finish lets the writer drain what is queued, then stop. It returns when
// the writer is done: everything written, or the output failed.
func (o *output) finish() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.mu.closed = true
	o.cond.Broadcast()
	for o.mu.busy && o.mu.err == nil {
		o.cond.Wait()
	}
}
