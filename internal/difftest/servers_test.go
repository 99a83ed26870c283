package difftest

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/flintkv/flint/internal/protocol"
	"github.com/flintkv/flint/internal/replica"
	"github.com/flintkv/flint/internal/server"
	"github.com/flintkv/flint/internal/server/servertest"
)

// liveness bounds every wait on a server: a reply, a connection, a start.
const liveness = 10 * time.Second

// A dialer opens a connection to a server.
type dialer func() (net.Conn, error)

func tcp(addr string) dialer {
	return func() (net.Conn, error) { return net.DialTimeout("tcp", addr, liveness) }
}

// missingTool skips the test, or fails it if FLINT_REQUIRE_CLIENTS is set
// (as CI sets it after `make clients`), for want of a Redis program.
func missingTool(t *testing.T, what string) {
	t.Helper()
	msg := what + "; `make clients` installs redis-server and redis-benchmark (Debian's redis-server " +
		"and redis-tools, with apt-get), or set FLINT_REDIS_SERVER and FLINT_REDIS_BENCHMARK to ones installed elsewhere"
	if os.Getenv("FLINT_REQUIRE_CLIENTS") != "" {
		t.Fatal(msg + " (FLINT_REQUIRE_CLIENTS is set: CI must install them)")
	}
	t.Skip(msg)
}

// tool returns the path of a Redis program: $env, or name on PATH.
func tool(t *testing.T, env, name string) string {
	t.Helper()
	path, err := exec.LookPath(cmp.Or(os.Getenv(env), name))
	if err != nil {
		missingTool(t, fmt.Sprintf("no %s (%v)", name, err))
	}
	return path
}

// startRedis runs redis-server 7 with no persistence, listening on a Unix
// socket only (--port 0), so that it needs no free port and never meets a
// Redis on 6379, and stops it when the test ends.
func startRedis(t *testing.T) dialer {
	t.Helper()
	path := tool(t, "FLINT_REDIS_SERVER", "redis-server")
	out, err := exec.Command(path, "--version").Output()
	if err != nil || !bytes.Contains(out, []byte(" v=7.")) {
		missingTool(t, fmt.Sprintf("%s is not Redis 7: %q (%v)", path, bytes.TrimSpace(out), err))
	}
	// Not t.TempDir(): a socket's path must fit in 108 bytes.
	dir, err := os.MkdirTemp("", "difftest")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "redis.sock")
	cmd := exec.Command(path, "--port", "0", "--unixsocket", sock, "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		os.RemoveAll(dir)
	})
	dial := func() (net.Conn, error) { return net.DialTimeout("unix", sock, liveness) }
	deadline := time.Now().Add(liveness)
	for {
		nc, err := dial()
		if err == nil {
			nc.Close()
			return dial
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			t.Fatalf("redis-server exited: %v\n%s", cmd.ProcessState, log)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server did not listen on %s within %v: %v", sock, liveness, err)
		}
	}
}

// conn sends commands and reads each reply as the raw bytes the server sent.
type conn struct {
	net.Conn
	rec *recorder
	br  *bufio.Reader // reads from rec
	rd  *protocol.Reader
}

// recorder keeps a copy of what is read through it.
type recorder struct {
	r   io.Reader
	buf []byte
}

func (r *recorder) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.buf = append(r.buf, p[:n]...)
	return n, err
}

func newConn(t *testing.T, dial dialer) *conn {
	t.Helper()
	nc, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{r: nc}
	br := bufio.NewReader(rec)
	return &conn{Conn: nc, rec: rec, br: br, rd: protocol.NewReader(br, protocol.DefaultReaderLimits)}
}

// do sends args as a RESP array of bulk strings and returns the reply,
// decoded and as the bytes that encoded it.
func (c *conn) do(args [][]byte) (protocol.Value, []byte, error) {
	return c.send(protocol.AppendCommand(nil, args...))
}

// send sends cmd, an encoded command, and returns the reply as do does.
func (c *conn) send(cmd []byte) (protocol.Value, []byte, error) {
	c.SetDeadline(time.Now().Add(liveness))
	if _, err := c.Write(cmd); err != nil {
		return protocol.Value{}, nil, err
	}
	v, err := c.rd.Read()
	if err != nil {
		return v, nil, err
	}
	// What the Reader consumed is what was recorded less what bufio holds ahead.
	n := len(c.rec.buf) - c.br.Buffered()
	raw := bytes.Clone(c.rec.buf[:n])
	c.rec.buf = append(c.rec.buf[:0], c.rec.buf[n:]...)
	return v, raw, nil
}

// setup empties the server and switches the connection to RESP proto.
func (c *conn) setup(t *testing.T, proto int) {
	t.Helper()
	cmds := []string{"FLUSHALL"}
	if proto == 3 {
		cmds = append(cmds, "HELLO 3")
	}
	for _, cmd := range cmds {
		v, _, err := c.do(bytes.Fields([]byte(cmd)))
		if err != nil || v.IsError() {
			t.Fatalf("%s: %v %v", cmd, v, err)
		}
	}
}

// startFlint runs a Flint server as flint serve runs a single node, on a
// replica with its log in a temporary directory (not fsynced: the test
// crashes nothing), and stops it when the test ends.
func startFlint(t *testing.T) string {
	t.Helper()
	rep, err := replica.Open(replica.Options{Dir: t.TempDir(), NoSync: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rep.Close(); err != nil {
			t.Error(err)
		}
	})
	return servertest.StartBackend(t, server.Config{}, rep).Addr
}
