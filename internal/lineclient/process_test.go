package lineclient_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/flintkv/flint/client"
	"github.com/flintkv/flint/internal/proctest"
)

// TestProcesses builds the flint binary and runs the scripts with
// `flint client` processes against a `flint serve` process.
func TestProcesses(t *testing.T) {
	bin := proctest.Build(t)
	srv := proctest.Serve(t, bin, "--requirepass", "pw", "--log-level", "warn")
	addr, serve := srv.Addr, srv.Cmd

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
	t.Run("one address dead", func(t *testing.T) {
		if _, err := c.Do(context.Background(), "FLUSHALL"); err != nil {
			t.Fatal(err)
		}
		s := loadScripts(t)[0]
		dead := proctest.FreeAddr(t)
		check(t, s.name, run(t, s, processes(bin, "client", dead, addr, "--pass", "pw")), false)
	})

	if err := serve.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := serve.Wait(); err != nil {
		t.Errorf("flint serve after SIGINT: %v", err)
	}
}

// processes starts `flint args...` processes as line clients.
func processes(bin string, args ...string) starter {
	return func(t *testing.T) *session {
		cmd := exec.Command(bin, args...)
		var stderr proctest.Buffer
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
