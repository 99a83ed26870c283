// Package proctest runs Flint as real processes in tests: it builds the
// flint binary and starts `flint serve` on a free loopback port, so that
// tests can signal, kill and restart it as an operator would.
package proctest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flintkv/flint/internal/procnet"
)

// Build builds cmd/flint into a directory removed when the test ends and
// returns the binary's path. The go command's build cache makes repeated
// builds cheap.
func Build(t testing.TB) string {
	t.Helper()
	return BuildTags(t, "")
}

// BuildTags is Build with build tags (comma-separated), such as "flintbugs"
// for a binary with injectable bugs (see package bugs).
func BuildTags(t testing.TB, tags string) string {
	t.Helper()
	goTool, err := exec.LookPath("go") // go test puts GOROOT/bin first in PATH
	if err != nil {
		t.Fatalf("no go command to build flint with: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "flint")
	out, err := exec.Command(goTool, "build", "-tags="+tags, "-o", bin, "github.com/flintkv/flint/cmd/flint").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// FreeAddr returns a loopback address that nothing listened on a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Server is a `flint serve` process.
type Server struct {
	Cmd  *exec.Cmd
	Addr string
	Logs *Buffer // its standard error
}

// Serve starts `bin serve --addr ADDR args...` on a free loopback address
// and waits until it accepts connections there. Unless args hold --dir, the
// data directory is a fresh temporary one. The process is killed when the
// test ends if still running, and its logs are printed if the test failed.
//
// FreeAddr's address can be taken by another process (a test running in
// parallel, or a connection's local port) before the server binds it. So a
// server counts as started only once it is the process that listens there
// (see procnet.Listens), not once something accepts there; and a server that
// exits because the address is in use is started again on another one, up
// to bindTries times in all. Logs then holds the last start's logs only;
// the test's log shows the others'.
func Serve(t testing.TB, bin string, args ...string) *Server {
	t.Helper()
	if !slices.Contains(args, "--dir") {
		args = append(args, "--dir", t.TempDir())
	}
	s := &Server{}
	t.Cleanup(func() {
		if s.Cmd != nil && s.Cmd.Process != nil && s.Cmd.ProcessState == nil {
			s.Cmd.Process.Kill()
			s.Cmd.Wait()
		}
		if t.Failed() && s.Logs != nil {
			t.Logf("flint serve logs:\n%s", s.Logs.String())
		}
	})
	for try := 1; ; try++ {
		s.Addr, s.Logs = FreeAddr(t), &Buffer{}
		s.Cmd = exec.Command(bin, append([]string{"serve", "--addr", s.Addr}, args...)...)
		s.Cmd.Stderr = s.Logs
		if err := s.Cmd.Start(); err != nil {
			t.Fatal(err)
		}
		err := s.await(20 * time.Second)
		switch {
		case err == nil:
			return s
		case s.Cmd.ProcessState != nil && AddrInUse(s.Logs.String()) && try < bindTries:
			t.Logf("flint serve found %s in use; starting it again on another address. Its logs:\n%s", s.Addr, s.Logs)
		default:
			t.Fatalf("flint serve on %s: %v\n%s", s.Addr, err, s.Logs.String())
		}
	}
}

// bindTries bounds how many times Serve starts a server that finds its
// address in use.
const bindTries = 5

// await waits until s's process listens on s.Addr, or has exited (then it
// reaps it), or timeout has passed. It asks procnet.Listens only once a connection
// there succeeds: reading /proc/net/tcp takes milliseconds when the test
// has left many sockets behind.
func (s *Server) await(timeout time.Duration) error {
	pid := s.Cmd.Process.Pid
	for deadline := time.Now().Add(timeout); ; time.Sleep(20 * time.Millisecond) {
		listens, err := false, error(nil)
		if c, derr := net.Dial("tcp", s.Addr); derr != nil {
			err = derr
		} else {
			c.Close()
			listens, err = procnet.Listens(pid, s.Addr)
		}
		switch {
		case listens:
			return nil
		case exited(pid):
			s.Cmd.Wait()
			return fmt.Errorf("exited at startup (%v)", s.Cmd.ProcessState)
		case time.Now().After(deadline):
			return fmt.Errorf("not listening after %v (%v)", timeout, err)
		}
	}
}

// AddrInUse reports whether a server's logs say that it could not listen
// because its address was in use.
func AddrInUse(logs string) bool {
	return strings.Contains(logs, "address already in use")
}

// Buffer is a bytes.Buffer safe for a process to write while a test reads.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// exited reports whether the child pid has exited and waits to be reaped,
// from /proc (Linux); elsewhere it reports false and Serve waits out its
// deadline.
func exited(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X')
}
