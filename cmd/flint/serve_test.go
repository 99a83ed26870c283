package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flintkv/flint/internal/proctest"
)

// flintBin is the binary built once for the tests in this package.
var flintBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "flint-bin")
	if err != nil {
		panic(err)
	}
	flintBin = filepath.Join(dir, "flint")
	if out, err := exec.Command("go", "build", "-o", flintBin, ".").CombinedOutput(); err != nil {
		os.Stderr.Write(out)
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func TestServeHelpListsFlags(t *testing.T) {
	out, err := exec.Command(flintBin, "serve", "--help").CombinedOutput()
	if err == nil {
		t.Fatal("--help should exit non-zero like any flag package usage")
	}
	for _, flag := range []string{"-addr", "-requirepass", "-maxclients", "-max-bulk", "-max-args",
		"-max-inline", "-max-query-buffer", "-max-output-buffer", "-output-timeout", "-idle-timeout", "-shutdown-timeout", "-huge-pages"} {
		if !strings.Contains(string(out), flag) {
			t.Errorf("serve --help does not document %s:\n%s", flag, out)
		}
	}
}

// TestServeAdvisesHugePages checks in /proc/PID/smaps that a server advises
// its heap to use huge pages (the VmFlags hg), and that --huge-pages=false
// stops it.
func TestServeAdvisesHugePages(t *testing.T) {
	on := proctest.Serve(t, flintBin)
	for deadline := time.Now().Add(10 * time.Second); advisedBytes(t, on.Cmd.Process.Pid) < 4<<20; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no 4 MiB of the server's memory advised to use huge pages within 10 s")
		}
	}
	off := proctest.Serve(t, flintBin, "--huge-pages=false")
	time.Sleep(500 * time.Millisecond) // five times the interval of the advice
	if n := advisedBytes(t, off.Cmd.Process.Pid); n >= 4<<20 {
		t.Fatalf("with --huge-pages=false, %d bytes of the server's memory are advised to use huge pages", n)
	}
}

// advisedBytes returns the size of the mappings of process pid whose
// VmFlags in /proc/PID/smaps include hg (MADV_HUGEPAGE).
func advisedBytes(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		t.Fatal(err)
	}
	var n, size int64
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 3 && f[0] == "Size:":
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatalf("smaps: %q", sc.Text())
			}
			size = kb << 10
		case len(f) > 0 && f[0] == "VmFlags:" && slices.Contains(f, "hg"):
			n += size
		}
	}
	return n
}

func TestServeRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--maxclients", "0"},
		{"--max-bulk", "-1"},
		{"--max-bulk", "100", "--max-query-buffer", "10"},
		{"--max-bulk", "536870913", "--max-query-buffer", "1073741824"}, // over 512 MiB
		{"--nosuchflag"},
		{"--log-level", "loud"},
		{"extra"},
	} {
		cmd := exec.Command(flintBin, append([]string{"serve"}, args...)...)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
			t.Errorf("serve %v: want exit status 2, got %v\n%s", args, err, out)
		}
		if len(out) == 0 {
			t.Errorf("serve %v: no message", args)
		}
	}
}

func TestUnknownSubcommand(t *testing.T) {
	out, err := exec.Command(flintBin, "frobnicate").CombinedOutput()
	if err == nil || !strings.Contains(string(out), `unknown command "frobnicate"`) {
		t.Fatalf("got %v\n%s", err, out)
	}
}

// TestServeGracefulShutdown sends SIGTERM while a client has a pipeline in
// flight: the server finishes the batch it read, every reply to it arrives
// whole and in order, and the process exits 0. (How much of the pipeline
// the server had read is up to the kernel; the in-process shutdown test
// checks that replies match the commands applied.)
func TestServeGracefulShutdown(t *testing.T) {
	srv := proctest.Serve(t, flintBin)
	cmd, addr, logs := srv.Cmd, srv.Addr, srv.Logs
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 2000
	var req bytes.Buffer
	for i := 0; i < n; i++ {
		req.WriteString("*2\r\n$4\r\nINCR\r\n$1\r\nk\r\n")
	}
	if _, err := c.Write(req.Bytes()); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	// Read one reply so that the server has certainly read the batch.
	if line, err := r.ReadString('\n'); err != nil || line != ":1\r\n" {
		t.Fatalf("first reply %q, %v", line, err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	got := 1
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			if line != "" {
				t.Fatalf("truncated reply %q after %d replies", line, got)
			}
			break
		}
		if want := fmt.Sprintf(":%d\r\n", got+1); line != want {
			t.Fatalf("reply %d: %q, want %q", got+1, line, want)
		}
		got++
	}
	if got > n {
		t.Errorf("got %d replies to %d pipelined commands", got, n)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v\n%s", err, logs.String())
	}
	if !strings.Contains(logs.String(), "stopped") {
		t.Errorf("no shutdown log:\n%s", logs.String())
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Error("server still accepts connections after shutdown")
	}
}

func TestServeRequirePassFromEnv(t *testing.T) {
	t.Setenv("FLINT_PASSWORD", "s3cret")
	c, err := net.Dial("tcp", proctest.Serve(t, flintBin).Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(c)
	for _, step := range []struct{ send, want string }{
		{"GET k\r\n", "-NOAUTH Authentication required.\r\n"},
		{"AUTH wrong\r\n", "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
		{"AUTH s3cret\r\n", "+OK\r\n"},
		{"GET k\r\n", "$-1\r\n"},
	} {
		c.Write([]byte(step.send))
		if line, err := r.ReadString('\n'); err != nil || line != step.want {
			t.Fatalf("%q: got %q, %v; want %q", step.send, line, err, step.want)
		}
	}
}
