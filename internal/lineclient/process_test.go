package lineclient_test

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flintkv/flint/client"
)

// TestProcesses builds the flint binary and runs the scripts with
// `flint client` processes against a `flint serve` process.
func TestProcesses(t *testing.T) {
	bin := buildFlint(t)
	addr := freeAddr(t)
	serve := startServe(t, bin, addr, "pw")

	c, err := client.New(addr, client.WithPassword("pw"), client.WithPoolSize(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, s := range loadScripts(t) {
		t.Run(s.name, func(t *testing.T) {
			if _, err := c.Do(context.Background(), "FLUSHALL"); err != nil {
				t.Fatal(err)
			}
			check(t, s.name, run(t, s, processes(bin, "client", addr, "--pass", "pw")), false)
		})
	}
	t.Run("wrong password", func(t *testing.T) {
		code, stderr := runClient(t, bin, "client", "--server", addr, "--pass", "nope")
		if code == 0 || !strings.Contains(stderr, "WRONGPASS") {
			t.Errorf("exit status %d, stderr %q; want non-zero and WRONGPASS", code, stderr)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		code, stderr := runClient(t, bin, "client", "--server", freeAddr(t))
		if code == 0 || !strings.Contains(stderr, "cannot connect to") {
			t.Errorf("exit status %d, stderr %q; want non-zero and a message", code, stderr)
		}
	})

	if err := serve.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := serve.Wait(); err != nil {
		t.Errorf("flint serve after SIGINT: %v", err)
	}
}

// buildFlint builds cmd/flint into a temporary directory.
func buildFlint(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go") // go test puts GOROOT/bin first in PATH
	if err != nil {
		t.Fatalf("no go command to build flint with: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "flint")
	out, err := exec.Command(goTool, "build", "-o", bin, "github.com/flintkv/flint/cmd/flint").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// freeAddr returns a loopback address that nothing listens on, for now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startServe runs `flint serve` on addr and waits until it answers. It is
// killed when the test ends if it is still running.
func startServe(t *testing.T, bin, addr, pass string) *exec.Cmd {
	t.Helper()
	var stderr syncBuffer
	cmd := exec.Command(bin, "serve", "--addr", addr, "--requirepass", pass, "--log-level", "warn")
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		if t.Failed() {
			t.Logf("flint serve stderr:\n%s", stderr.String())
		}
	})
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		c, err := client.New(addr, client.WithPassword(pass), client.WithPoolSize(1))
		if err == nil {
			c.Close()
			return cmd
		}
		if time.Now().After(deadline) {
			t.Fatalf("flint serve is not answering on %s: %v\n%s", addr, err, stderr.String())
		}
	}
}

// processes starts `flint args...` processes as line clients.
func processes(bin string, args ...string) starter {
	return func(t *testing.T) *session {
		cmd := exec.Command(bin, args...)
		var stderr syncBuffer
		cmd.Stderr = &stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				cmd.Process.Kill()
				cmd.Wait()
			}
		})
		return &session{stdin: stdin, stdout: bufio.NewReader(stdout), wait: cmd.Wait, stderr: stderr.String}
	}
}

// runClient runs `flint args...` with empty input and returns its exit
// status and stderr.
func runClient(t *testing.T, bin string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}
