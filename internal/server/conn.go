package server

import (
	"errors"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/flintkv/flint/internal/protocol"
)

// Initial and idle sizes of a connection's buffers.
const (
	inInitial  = 16 << 10
	outInitial = 16 << 10
	keepIdle   = 64 << 10 // a buffer larger than this is dropped once drained
)

// conn is one client connection. Its fields belong to its goroutine, except
// those under info, which CLIENT LIST reads from other connections.
type conn struct {
	srv    *Server
	nc     net.Conn
	id     int64
	parser *protocol.Parser

	in    []byte // unparsed input is in[:inLen]
	inLen int
	args  [][]byte
	out   []byte   // replies not yet written
	lower [32]byte // scratch for lower-casing command names
	entry []byte   // scratch for encoding entries

	proto  protocol.Version
	authed bool
	quit   bool // close after writing the replies so far

	// Per-batch counters, added to the server's stats once per batch.
	commands, hits, misses int64

	info struct {
		created time.Time
		name    atomic.Pointer[string]
		libName atomic.Pointer[string]
		libVer  atomic.Pointer[string]
		active  atomic.Int64 // unix nanos of the last command
	}
}

func newConn(s *Server, nc net.Conn, id int64) *conn {
	c := &conn{srv: s, nc: nc, id: id, parser: protocol.NewParser(s.lim),
		in: make([]byte, inInitial), proto: protocol.RESP2, authed: s.cfg.RequirePass == ""}
	c.info.created = time.Now()
	c.info.active.Store(c.info.created.UnixNano())
	return c
}

// serve runs the connection until the client leaves, breaks the protocol,
// or the server shuts down.
func (c *conn) serve() {
	defer c.srv.forget(c)
	defer c.close()
	for !c.quit && !c.srv.closing.Load() {
		if err := c.fill(); err != nil {
			c.readFailed(err)
			return
		}
		if err := c.runBatch(); err != nil {
			return
		}
	}
}

// How long a closing connection waits for input to stop: closing a socket
// with unread input makes the kernel send a reset and drop the output it has
// not sent yet.
const (
	lingerQuiet = 50 * time.Millisecond // no input for this long: close
	lingerMax   = time.Second           // close after this long regardless
)

// close closes the connection so that the replies already written reach the
// client; without this, a client that pipelines lost replies to commands
// the server had executed (TestGracefulShutdown). It sends FIN after the
// replies and discards input until the client closes too or goes quiet.
func (c *conn) close() {
	defer c.nc.Close()
	tc, ok := c.nc.(*net.TCPConn)
	if !ok || tc.CloseWrite() != nil {
		return
	}
	for end := time.Now().Add(lingerMax); time.Now().Before(end); {
		tc.SetReadDeadline(time.Now().Add(lingerQuiet))
		if _, err := tc.Read(c.in); err != nil {
			return
		}
	}
}

// fill reads whatever the client has sent, growing the input buffer when a
// single command does not fit, up to MaxQueryBuffer.
func (c *conn) fill() error {
	if c.inLen == len(c.in) {
		if len(c.in) >= c.srv.cfg.MaxQueryBuffer {
			return errQueryBuffer
		}
		grown := make([]byte, min(2*len(c.in), c.srv.cfg.MaxQueryBuffer))
		copy(grown, c.in[:c.inLen])
		c.in = grown
	}
	if d := c.srv.cfg.IdleTimeout; d > 0 && !c.srv.closing.Load() {
		c.nc.SetReadDeadline(time.Now().Add(d))
	}
	n, err := c.nc.Read(c.in[c.inLen:])
	c.inLen += n
	c.srv.stats.netIn.Add(int64(n))
	if n > 0 {
		return nil
	}
	return err
}

var errQueryBuffer = errors.New("query buffer limit exceeded")

func (c *conn) readFailed(err error) {
	switch {
	case errors.Is(err, errQueryBuffer):
		c.srv.log.Warn("closing client that reached the query buffer limit", "id", c.id,
			"addr", c.nc.RemoteAddr().String(), "limit", c.srv.cfg.MaxQueryBuffer)
		c.out = protocol.AppendError(c.out[:0], "ERR Protocol error: query buffer limit exceeded")
		c.flush()
	case errors.Is(err, os.ErrDeadlineExceeded) && !c.srv.closing.Load():
		c.srv.log.Info("closing idle client", "id", c.id, "addr", c.nc.RemoteAddr().String())
	}
}

// runBatch executes every complete command in the input buffer and writes
// all the replies. It returns an error when the connection must close.
func (c *conn) runBatch() error {
	off := 0
	var perr error
	for !c.quit {
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
	c.consume(off)
	c.publishStats()
	if perr != nil {
		c.out = protocol.AppendError(c.out, "ERR "+perr.Error())
		c.quit = true
	}
	if err := c.flush(); err != nil {
		return err
	}
	if perr != nil {
		return perr
	}
	return nil
}

// consume drops the first n bytes of input, and the buffer itself when it
// grew for a large command that is now done.
func (c *conn) consume(n int) {
	rest := c.inLen - n
	if len(c.in) > keepIdle && rest <= inInitial {
		small := make([]byte, inInitial)
		copy(small, c.in[n:c.inLen])
		c.in = small
	} else if n > 0 {
		copy(c.in, c.in[n:c.inLen])
	}
	c.inLen = rest
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
	c.info.active.Store(time.Now().UnixNano())
}

// flush writes the buffered replies. A client that accepts none of them for
// OutputTimeout is dropped.
func (c *conn) flush() error {
	if len(c.out) == 0 {
		return nil
	}
	c.nc.SetWriteDeadline(time.Now().Add(c.srv.cfg.OutputTimeout))
	n, err := c.nc.Write(c.out)
	c.srv.stats.netOut.Add(int64(n))
	if cap(c.out) > keepIdle {
		c.out = make([]byte, 0, outInitial)
	} else {
		c.out = c.out[:0]
	}
	if err != nil {
		c.quit = true
		if errors.Is(err, os.ErrDeadlineExceeded) {
			c.srv.log.Warn("closing client that does not read its replies", "id", c.id,
				"addr", c.nc.RemoteAddr().String(), "timeout", c.srv.cfg.OutputTimeout)
		}
	}
	return err
}

// writeLarge appends a bulk string, writing a large one straight from val so
// that it is never copied into the reply buffer.
func (c *conn) writeLarge(val []byte) {
	if len(val) < c.srv.cfg.MaxOutputBuffer {
		c.out = protocol.AppendBulk(c.out, val)
		c.maybeFlush()
		return
	}
	c.out = protocol.AppendBulkHeader(c.out, len(val))
	if c.flush() != nil {
		return
	}
	c.nc.SetWriteDeadline(time.Now().Add(c.srv.cfg.OutputTimeout))
	n, err := c.nc.Write(val)
	c.srv.stats.netOut.Add(int64(n))
	if err != nil {
		c.quit = true
		return
	}
	c.out = append(c.out, '\r', '\n')
}

// maybeFlush writes the reply buffer out once it reaches MaxOutputBuffer.
// After a write error the connection is closing and replies are discarded.
func (c *conn) maybeFlush() {
	if len(c.out) >= c.srv.cfg.MaxOutputBuffer {
		c.flush()
	}
}
