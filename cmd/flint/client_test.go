package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/flintkv/flint/internal/proctest"
	"github.com/flintkv/flint/internal/resptest"
)

func TestClientBadUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--bogus"},
		{"localhost"},    // no port
		{"127.0.0.1:1,"}, // an empty address in the list
		{"127.0.0.1:1", "--server", "127.0.0.1:2"}, // addresses given twice
		{"--server", "nowhere"},
		{"--help"},
	} {
		out, code := runFlint(t, flintBin, nil, append([]string{"client"}, args...)...)
		if code != 2 || !strings.Contains(out, "usage: flint client") {
			t.Errorf("flint client %s: exit %d, want 2 and a usage message:\n%s", strings.Join(args, " "), code, out)
		}
	}
}

// TestClientWaitsForServer starts `flint client` with its servers down, one
// for good and one that comes up after a while: the commands wait, and
// are answered once it does.
func TestClientWaitsForServer(t *testing.T) {
	srv := resptest.Start(t, resptest.Store{}.Handle)
	srv.Stop()
	cmd := exec.Command(flintBin, "client", proctest.FreeAddr(t)+","+srv.Addr)
	cmd.Stdin = strings.NewReader("PUT k v\nGET k\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	time.Sleep(500 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("flint client exited with no server up: %v\n%s", err, stderr.String())
	default:
	}
	srv.Restart(t)
	select {
	case err := <-done:
		if want := "PUT k not_found\nGET k v\nSTOP\n"; err != nil || stdout.String() != want {
			t.Fatalf("flint client: %v, output %q; want %q. stderr:\n%s", err, stdout.String(), want, stderr.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done // the output is then complete
		t.Fatalf("flint client did not finish once a server was up; stderr:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "no server answers at") {
		t.Errorf("stderr %q; want it to say it waits for a server", stderr.String())
	}
}
