package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"syscall"

	"github.com/flintkv/flint/internal/protocol"
)

var (
	// errConnect means the server could not be reached; the reason has
	// been printed.
	errConnect = errors.New("cli: could not connect")
	// errLost means the connection broke before a reply arrived; the
	// reason has been printed and the session is no longer connected.
	errLost = errors.New("cli: connection lost")
	// errRejected means the server refused AUTH or HELLO 3 after
	// connecting; its error has been printed and the connection is open.
	errRejected = errors.New("cli: handshake rejected")
)

// session is a connection to the server that reconnects on demand. It
// prints connection trouble to stderr itself, as redis-cli does, so its
// callers only decide whether to go on.
type session struct {
	cfg    Config
	stderr io.Writer
	nc     net.Conn // nil when not connected
	rd     *protocol.Reader
	buf    []byte // the command being sent
}

// name is the server's address as messages and the prompt show it.
func (s *session) name() string { return s.cfg.Host + ":" + strconv.Itoa(s.cfg.Port) }

// connect dials the server, then sends AUTH and HELLO 3 as configured. It
// returns errConnect if the server cannot be reached or the handshake
// breaks off, and errRejected, still connected, if the server answers it
// with an error.
func (s *session) connect() error {
	nc, err := net.Dial("tcp", net.JoinHostPort(s.cfg.Host, strconv.Itoa(s.cfg.Port)))
	if err != nil {
		fmt.Fprintf(s.stderr, "Could not connect to Flint at %s: %s\n", s.name(), reason(err))
		return errConnect
	}
	s.nc, s.rd = nc, protocol.NewReader(bufio.NewReader(nc), protocol.DefaultReaderLimits)
	if s.cfg.Password != "" {
		if err := s.handshake("AUTH", "AUTH", s.cfg.Password); err != nil {
			return err
		}
	}
	if s.cfg.RESP3 {
		return s.handshake("HELLO 3", "HELLO", "3")
	}
	return nil
}

// handshake sends one command of the connection's setup and checks that
// it succeeded; what names it in messages.
func (s *session) handshake(what string, args ...string) error {
	bargs := make([][]byte, len(args))
	for i, a := range args {
		bargs[i] = []byte(a)
	}
	v, err := s.do(bargs)
	switch {
	case err != nil:
		return errConnect
	case v.IsError():
		fmt.Fprintf(s.stderr, "%s failed: %s\n", what, v.Str)
		return errRejected
	}
	return nil
}

// do sends one command and reads its reply, connecting first if need be.
// On errLost or errConnect the session is left unconnected.
func (s *session) do(args [][]byte) (protocol.Value, error) {
	if s.nc == nil {
		if err := s.connect(); err != nil && !errors.Is(err, errRejected) {
			s.close()
			return protocol.Value{}, err
		}
	}
	s.buf = protocol.AppendCommand(s.buf[:0], args...)
	_, err := s.nc.Write(s.buf)
	var v protocol.Value
	if err == nil {
		v, err = s.rd.Read()
	}
	if err != nil {
		fmt.Fprintf(s.stderr, "Error: %s\n", reason(err))
		s.close()
		return protocol.Value{}, errLost
	}
	return v, nil
}

func (s *session) close() {
	if s.nc != nil {
		s.nc.Close()
	}
	s.nc, s.rd = nil, nil
}

// reason says briefly why a connection failed: "connection refused", "no
// such host", or, for any way the server can hang up on a client,
// "Server closed the connection" (hiredis's words, which redis-cli prints).
func reason(err error) string {
	var errno syscall.Errno
	var dns *net.DNSError
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "Server closed the connection"
	case errors.As(err, &errno):
		return errno.Error()
	case errors.As(err, &dns):
		return dns.Err
	}
	return err.Error()
}
