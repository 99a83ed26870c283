// Package resptest runs fake RESP servers on loopback for the tests of
// Flint's clients. A fake server answers each command with the reply its
// test's Handler gives, and can be stopped and started again on the same
// address, as a server that crashes and restarts would be.
package resptest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flintkv/flint/internal/protocol"
)

// Handler answers one command, given its arguments, the name first as
// sent. It returns the encoded reply, or Hang or Drop. The server calls it
// for one command at a time, whatever the connection.
type Handler func(args []string) string

// Replies a Handler may give besides encoded RESP.
const (
	// Hang leaves the command unanswered and the connection open: the
	// server reads and drops whatever else comes on it, until Stop.
	Hang = "\x00hang"
	// Drop closes the connection without answering, as a crash would.
	Drop = "\x00drop"
)

// Server is a fake RESP server.
type Server struct {
	Addr string
	newH func() Handler // the Handler of each new connection
	hmu  sync.Mutex     // serializes calls of the Handlers
	wg   sync.WaitGroup

	mu struct {
		sync.Mutex
		ln    net.Listener // nil while stopped
		conns map[net.Conn]bool
	}
}

// Start runs a server answering with h on 127.0.0.1 and a free port. It is
// stopped when the test ends.
func Start(t testing.TB, h Handler) *Server {
	t.Helper()
	return StartConns(t, func() Handler { return h })
}

// StartConns is Start with a Handler of its own for each connection, made
// by newH when the connection is accepted, for a server that keeps state
// per connection (such as ASKING's).
func StartConns(t testing.TB, newH func() Handler) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Addr: ln.Addr().String(), newH: newH}
	s.mu.conns = make(map[net.Conn]bool)
	s.serve(ln)
	t.Cleanup(s.Stop)
	return s
}

// Stop closes the listener and every connection, unanswered commands and
// all, and waits for the server's goroutines to end. Stopping a stopped
// server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	if s.mu.ln != nil {
		s.mu.ln.Close()
		s.mu.ln = nil
	}
	for nc := range s.mu.conns {
		nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// Restart listens again on the server's address after Stop. The port may
// still be held for a moment by the connections just closed, so it tries
// for up to two seconds.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	var err error
	for range 100 {
		var ln net.Listener
		if ln, err = net.Listen("tcp", s.Addr); err == nil {
			s.serve(ln)
			return
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("resptest: restarting on %s: %v", s.Addr, err)
}

// serve accepts connections on ln until Stop.
func (s *Server) serve(ln net.Listener) {
	s.mu.Lock()
	s.mu.ln = ln
	s.mu.Unlock()
	s.wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			if !s.track(nc) {
				nc.Close()
				return
			}
			s.wg.Go(func() { s.conn(nc) })
		}
	})
}

// track records nc for Stop to close, unless the server is stopped.
func (s *Server) track(nc net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.ln == nil {
		return false
	}
	s.mu.conns[nc] = true
	return true
}

// conn answers the commands of one connection until it closes.
func (s *Server) conn(nc net.Conn) {
	defer func() {
		s.mu.Lock()
		delete(s.mu.conns, nc)
		s.mu.Unlock()
		nc.Close()
	}()
	r := bufio.NewReader(nc)
	h := s.newH()
	for {
		args, err := readCommand(r)
		if err != nil {
			return
		}
		s.hmu.Lock()
		reply := h(args)
		s.hmu.Unlock()
		switch reply {
		case Drop:
			return
		case Hang:
			io.Copy(io.Discard, r)
			return
		}
		if _, err := io.WriteString(nc, reply); err != nil {
			return
		}
	}
}

// readCommand reads one command in RESP's multi-bulk form.
func readCommand(r *bufio.Reader) ([]string, error) {
	n, err := header(r, '*')
	if err != nil {
		return nil, err
	}
	args := make([]string, n)
	for i := range args {
		l, err := header(r, '$')
		if err != nil {
			return nil, err
		}
		b := make([]byte, l+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		args[i] = string(b[:l])
	}
	return args, nil
}

// header reads a line "<prefix><n>\r\n" and returns n.
func header(r *bufio.Reader, prefix byte) (int, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if len(line) < 2 || line[0] != prefix {
		return 0, fmt.Errorf("resptest: want %c<n>, got %q", prefix, line)
	}
	n, err := strconv.Atoi(line[1:])
	if err != nil || n < 0 || n > 1<<20 {
		return 0, fmt.Errorf("resptest: bad length in %q", line)
	}
	return n, nil
}

// Encoded replies.
const (
	OK   = "+OK\r\n"
	Null = "$-1\r\n"
)

// Err returns the error reply msg, such as Err("TRYAGAIN no leader").
func Err(msg string) string { return string(protocol.AppendError(nil, msg)) }

// Bulk returns the bulk string s.
func Bulk(s string) string { return string(protocol.AppendBulkString(nil, s)) }

// Int returns the integer n.
func Int(n int64) string { return string(protocol.AppendInt(nil, n)) }

// Array returns the array of the encoded elems.
func Array(elems ...string) string {
	return string(protocol.AppendArray(nil, len(elems))) + strings.Join(elems, "")
}

// Moved returns the MOVED error that sends slot's commands to addr.
func Moved(slot int, addr string) string { return Err(fmt.Sprintf("MOVED %d %s", slot, addr)) }
