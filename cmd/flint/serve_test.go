package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flintkv/flint/internal/proctest"
	"github.com/redis/go-redis/v9"
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
		"-max-inline", "-max-query-buffer", "-max-output-buffer", "-output-timeout", "-idle-timeout", "-expire-delay", "-shutdown-timeout", "-huge-pages"} {
		if !strings.Contains(string(out), flag) {
			t.Errorf("serve --help does not document %s:\n%s", flag, out)
		}
	}
}

// TestServeCollapsesHeap loads 64 MiB of values into a server and checks
// that its heap then moves into huge pages (huge_pages_bytes in INFO
// memory), and that --huge-pages=false keeps it out. It needs transparent
// huge pages set to madvise: with always, the kernel uses them either way.
func TestServeCollapsesHeap(t *testing.T) {
	if b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil || !bytes.Contains(b, []byte("[madvise]")) {
		t.Skipf("transparent huge pages are not set to madvise here: %q, %v", b, err)
	}
	on := proctest.Serve(t, flintBin, "--fsync", "never")
	c := loadValues(t, on.Addr)
	for deadline := time.Now().Add(20 * time.Second); hugeBytes(t, c) < 16<<20; time.Sleep(50 * time.Millisecond) {
		if strings.Contains(on.Logs.String(), "serving without huge pages") {
			t.Skipf("the server cannot collapse memory here:\n%s", on.Logs.String())
		}
		if time.Now().After(deadline) {
			t.Fatalf("20 s after loading 64 MiB, the server has %d bytes in huge pages; want 16 MiB at least", hugeBytes(t, c))
		}
	}
	off := proctest.Serve(t, flintBin, "--fsync", "never", "--huge-pages=false")
	c = loadValues(t, off.Addr)
	time.Sleep(2 * time.Second)
	if n := hugeBytes(t, c); n >= 4<<20 {
		t.Fatalf("with --huge-pages=false, the server has %d bytes in huge pages", n)
	}
}

// loadValues sets 16,384 keys to values of 4 KiB and returns the client.
func loadValues(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { c.Close() })
	val := strings.Repeat("v", 4096)
	for i := 0; i < 16384; i += 256 {
		p := c.Pipeline()
		for j := i; j < i+256; j++ {
			p.Set(context.Background(), fmt.Sprintf("key:%06d", j), val, 0)
		}
		if _, err := p.Exec(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// hugeBytes returns huge_pages_bytes from the server's INFO memory.
func hugeBytes(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	return infoInt(t, c, "memory", "huge_pages_bytes")
}

// infoInt returns the integer field name of the server's INFO section.
func infoInt(t *testing.T, c *redis.Client, section, name string) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), section).Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("INFO %s: %q", section, line)
			}
			return n
		}
	}
	t.Fatalf("no %s in INFO %s:\n%s", name, section, info)
	return 0
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

// TestServeAddsLogProcessor checks that a durable server runs one Go
// processor more than one with --fsync never, for the log's writer to hold
// through its fsyncs, and that GOMAXPROCS, when set to a number the runtime
// takes, decides alone.
func TestServeAddsLogProcessor(t *testing.T) {
	procs := func(args ...string) int64 {
		t.Helper()
		c := redis.NewClient(&redis.Options{Addr: proctest.Serve(t, flintBin, args...).Addr})
		defer c.Close()
		return infoInt(t, c, "server", "go_max_procs")
	}
	for _, unset := range []string{"", "0", "x"} { // the runtime ignores all three
		t.Setenv("GOMAXPROCS", unset)
		if durable, never := procs(), procs("--fsync", "never"); durable != never+1 {
			t.Errorf("GOMAXPROCS=%q: go_max_procs %d with --fsync always, %d with never; want one more", unset, durable, never)
		}
	}
	t.Setenv("GOMAXPROCS", "1")
	if n := procs(); n != 1 {
		t.Errorf("go_max_procs %d with GOMAXPROCS=1", n)
	}
}
