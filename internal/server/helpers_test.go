package server_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flintkv/flint/internal/protocol"
	"github.com/flintkv/flint/internal/server"
	"github.com/flintkv/flint/internal/server/servertest"
)

// These end-to-end tests talk to a real server over loopback TCP: through
// go-redis, a third-party client, for what applications see, and through raw
// sockets for the protocol itself (framing, limits, garbage, stalls).

// liveness bounds every wait for something that should happen promptly. It
// is generous: it only turns a hang into a failure.
const liveness = 20 * time.Second

// start runs a server with cfg that stops when the test ends.
func start(t testing.TB, cfg server.Config) *servertest.Server {
	t.Helper()
	return servertest.Start(t, cfg)
}

// newClient returns a go-redis client of addr, closed when the test ends.
// Retries are off so that every error the server sends reaches the test.
func newClient(t testing.TB, addr string, opt *redis.Options) *redis.Client {
	t.Helper()
	if opt == nil {
		opt = &redis.Options{}
	}
	opt.Addr = addr
	opt.MaxRetries = -1
	if opt.ReadTimeout == 0 {
		opt.ReadTimeout = liveness
	}
	if opt.WriteTimeout == 0 {
		opt.WriteTimeout = liveness
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return c
}

// ctx returns a context that ends with the test, or after liveness.
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), liveness)
	t.Cleanup(cancel)
	return c
}

// rawConn is a plain TCP connection that writes bytes as given and decodes
// replies with the protocol package's client-side Reader.
type rawConn struct {
	t testing.TB
	net.Conn
	br *bufio.Reader
	rd *protocol.Reader // decodes from br
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, liveness)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	br := bufio.NewReader(nc)
	return &rawConn{t: t, Conn: nc, br: br, rd: protocol.NewReader(br, protocol.DefaultReaderLimits)}
}

// send writes s as it is.
func (c *rawConn) send(s string) {
	c.t.Helper()
	c.SetWriteDeadline(time.Now().Add(liveness))
	if _, err := io.WriteString(c.Conn, s); err != nil {
		c.t.Fatalf("write %q: %v", trim(s), err)
	}
}

// read returns the next reply.
func (c *rawConn) read() protocol.Value {
	c.t.Helper()
	c.SetReadDeadline(time.Now().Add(liveness))
	v, err := c.rd.Read()
	if err != nil {
		c.t.Fatalf("read reply: %v", err)
	}
	return v
}

// do sends one command as a multi-bulk array and returns its reply.
func (c *rawConn) do(args ...string) protocol.Value {
	c.t.Helper()
	c.send(command(args...))
	return c.read()
}

// expect reads a reply and checks its rendering (protocol.Value.String).
func (c *rawConn) expect(want string) {
	c.t.Helper()
	if got := c.read().String(); got != want {
		c.t.Fatalf("reply %s, want %s", got, want)
	}
}

// expectBytes reads exactly len(want) bytes and checks that they are want,
// for checks of the encoding itself.
func (c *rawConn) expectBytes(want string) {
	c.t.Helper()
	c.SetReadDeadline(time.Now().Add(liveness))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c.br, got); err != nil {
		c.t.Fatalf("reading %q: got %q, %v", want, got, err)
	}
	if string(got) != want {
		c.t.Fatalf("got %q, want %q", got, want)
	}
}

// expectClosed checks that the server closes the connection without sending
// anything more.
func (c *rawConn) expectClosed() {
	c.t.Helper()
	c.SetReadDeadline(time.Now().Add(liveness))
	v, err := c.rd.Read()
	if err == nil {
		c.t.Fatalf("got reply %s, want the connection closed", v)
	}
	if !closedErr(err) {
		c.t.Fatalf("got %v, want the connection closed", err)
	}
}

// closedErr reports whether err means the peer closed the connection.
func closedErr(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "broken pipe")
}

// command encodes args as a client sends them.
func command(args ...string) string {
	bs := make([][]byte, len(args))
	for i, a := range args {
		bs[i] = []byte(a)
	}
	return string(protocol.AppendCommand(nil, bs...))
}

func trim(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// errText is err's message, or "<nil>".
func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// wantErr checks that err is exactly the server error msg.
func wantErr(t testing.TB, err error, msg string) {
	t.Helper()
	if errText(err) != msg {
		t.Fatalf("error %q, want %q", errText(err), msg)
	}
}

// eventually polls cond until it holds, failing after liveness.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(liveness)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
