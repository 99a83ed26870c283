package proctest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/flintkv/flint/internal/procnet"
)

// fakeServeEnv, set to "K:FILE", makes this test binary, started as
// `BIN serve --addr ADDR ...`, act as a flint serve for TestServeRetries:
// each start appends a byte to FILE, and the first K exit as a server
// whose address is in use does; later ones listen on ADDR until killed.
const fakeServeEnv = "PROCTEST_FAKE_SERVE"

func TestMain(m *testing.M) {
	if spec := os.Getenv(fakeServeEnv); spec != "" {
		os.Exit(fakeServe(spec, os.Args[1:]))
	}
	os.Exit(m.Run())
}

func fakeServe(spec string, args []string) int {
	k, file, _ := strings.Cut(spec, ":")
	failures, err := strconv.Atoi(k)
	if err != nil || len(args) < 3 || args[0] != "serve" || args[1] != "--addr" {
		fmt.Fprintf(os.Stderr, "fake serve: bad spec %q or arguments %q\n", spec, args)
		return 2
	}
	f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		_, err = f.Write([]byte{'x'})
		f.Close()
	}
	starts, rerr := os.ReadFile(file)
	if err != nil || rerr != nil {
		fmt.Fprintf(os.Stderr, "fake serve: counting starts: %v %v\n", err, rerr)
		return 2
	}
	if len(starts) <= failures {
		fmt.Fprintf(os.Stderr, "level=ERROR msg=\"server failed\" err=\"listen tcp %s: bind: address already in use\"\n", args[2])
		return 1
	}
	ln, err := net.Listen("tcp", args[2])
	if err != nil {
		fmt.Fprintf(os.Stderr, "fake serve: %v\n", err)
		return 1
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return 1
		}
		c.Close()
	}
}

// fatalTB is a testing.TB whose Fatal and Fatalf record the message and end
// the goroutine, so that a test can check that a helper fails. The helper
// must run on a goroutine of its own, which the test waits for before it
// reads msg; everything else (FailNow, Skip, Cleanup) goes to the test's TB.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Fatal(args ...any) { f.Fatalf("%s", fmt.Sprint(args...)) }

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestServeRetries checks that Serve starts a server that found its address
// in use again, on another address, up to bindTries starts in all, and
// fails once that many have.
func TestServeRetries(t *testing.T) {
	bin, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	for _, failures := range []int{bindTries - 1, bindTries} {
		t.Run(fmt.Sprintf("failures=%d", failures), func(t *testing.T) {
			count := filepath.Join(t.TempDir(), "starts")
			t.Setenv(fakeServeEnv, fmt.Sprintf("%d:%s", failures, count))
			tb := &fatalTB{TB: t}
			var s *Server
			done := make(chan struct{})
			go func() { defer close(done); s = Serve(tb, bin) }()
			<-done
			starts, err := os.ReadFile(count)
			if err != nil {
				t.Fatal(err)
			}
			if len(starts) != min(failures+1, bindTries) {
				t.Errorf("%d starts; want %d", len(starts), min(failures+1, bindTries))
			}
			if failures < bindTries {
				if s == nil {
					t.Fatalf("Serve failed after %d starts that found the address in use: %s", failures, tb.msg)
				}
				if ok, err := procnet.Listens(s.Cmd.Process.Pid, s.Addr); !ok {
					t.Fatalf("Serve returned a server that does not listen on %s: %v", s.Addr, err)
				}
				return
			}
			if s != nil || !AddrInUse(tb.msg) {
				t.Fatalf("Serve after %d starts that found the address in use: server %v, failure %q; want a failure that says so", failures, s, tb.msg)
			}
		})
	}
}
