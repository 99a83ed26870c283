package server_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flintkv/flint/internal/procnet"
	"github.com/flintkv/flint/internal/protocol"
	"github.com/flintkv/flint/internal/server"
	"github.com/flintkv/flint/internal/store"
)

// running is a server started by hand, for tests that need Serve's result.
type running struct {
	*server.Server
	addr   string
	store  *store.Store
	served chan error
}

func serve(t *testing.T, cfg server.Config) *running {
	t.Helper()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(store.Options{})
	r := &running{Server: server.New(cfg, server.Local{S: st}), addr: ln.Addr().String(), store: st, served: make(chan error, 1)}
	go func() { r.served <- r.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), liveness)
		defer cancel()
		r.Shutdown(ctx)
	})
	return r
}

// TestGracefulShutdown shuts the server down while a client is in the
// middle of a long pipeline of INCRs. Every command the server read is
// answered: the replies the client got are 1, 2, 3, ... and the counter
// ends at the number of replies. New connections are refused, idle and
// half-sent connections are closed, and Serve returns ErrServerClosed.
func TestGracefulShutdown(t *testing.T) { testGracefulShutdown(t, func() {}) }

// TestGracefulShutdownSlowReader is TestGracefulShutdown with a client
// that reads its replies slowly once the server shuts down (a millisecond
// every 100), taking seconds over them, which is what a loaded machine
// makes of any client: every one still arrives. The server gave up after
// a second, and reset the connection, dropping the replies it had not
// sent, when its wait was bounded by time rather than by the client's
// progress.
func TestGracefulShutdownSlowReader(t *testing.T) {
	var n int
	testGracefulShutdown(t, func() {
		if n++; n%100 == 0 {
			time.Sleep(time.Millisecond)
		}
	})
}

// testGracefulShutdown is TestGracefulShutdown whose client calls pace
// after each reply it reads once the server began to shut down.
func testGracefulShutdown(t *testing.T, pace func()) {
	r := serve(t, server.Config{})
	idle := dialRaw(t, r.addr)
	idle.send("PING\r\n")
	idle.expect(`"PONG"`)
	half := dialRaw(t, r.addr)
	half.send("*2\r\n$3\r\nGET")

	nc, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	stop := make(chan struct{})
	writeDone := make(chan struct{})
	go func() { // writes INCRs until the server closes the connection
		defer close(writeDone)
		batch := []byte(strings.Repeat(command("INCR", "ctr"), 1000))
		for {
			select {
			case <-stop:
				return
			default:
			}
			nc.SetWriteDeadline(time.Now().Add(liveness))
			if _, err := nc.Write(batch); err != nil {
				return
			}
		}
	}()
	var replies atomic.Int64
	var shutting atomic.Bool
	var reading sync.Mutex // held by the test to pause the reader
	readErr := make(chan error, 1)
	go func() { // reads replies until the connection ends
		rd := protocol.NewReader(bufio.NewReader(nc), protocol.DefaultReaderLimits)
		for {
			reading.Lock()
			nc.SetReadDeadline(time.Now().Add(liveness))
			v, err := rd.Read()
			reading.Unlock()
			if err != nil {
				nc.Close() // all replies are in: leave, as a client would
				readErr <- err
				return
			}
			if want := replies.Load() + 1; v.Kind != protocol.KindInt || v.Int != want {
				readErr <- errors.New("reply " + v.String() + ", want " + strconv.FormatInt(want, 10))
				return
			}
			replies.Add(1)
			if shutting.Load() {
				pace()
			}
		}
	}()
	eventually(t, "the pipeline to get going", func() bool { return replies.Load() >= 20000 })

	// Pause the reader so that the server's replies back up and its
	// connection is blocked writing a batch when Shutdown comes; then read
	// on. The replies still queued in the server's socket when it closes
	// must arrive.
	reading.Lock()
	time.Sleep(200 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), liveness)
	defer cancel()
	shut := make(chan error, 1)
	shutting.Store(true)
	go func() { shut <- r.Shutdown(ctx) }()
	time.Sleep(100 * time.Millisecond)
	reading.Unlock()
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	select {
	case err := <-r.served:
		if err != server.ErrServerClosed {
			t.Fatalf("Serve returned %v, want ErrServerClosed", err)
		}
	case <-time.After(liveness):
		t.Fatal("Serve did not return after Shutdown")
	}
	if err := <-readErr; !closedErr(err) {
		t.Fatalf("pipeline reader: %v", err)
	}
	close(stop)
	<-writeDone
	got := replies.Load()
	v, _ := r.store.Get([]byte("ctr"))
	if string(v) != strconv.FormatInt(got, 10) {
		t.Fatalf("the server executed %s INCRs but the client got %d replies", v, got)
	}
	t.Logf("%d INCRs executed and answered before shutdown", got)

	idle.expectClosed()
	half.expectClosed()
	// Not a dial: on a busy machine another process may listen on the
	// port once it is free.
	if listens, _ := procnet.Listens(os.Getpid(), r.addr); listens {
		t.Fatal("the server still listens after Shutdown")
	}
	// Shutdown and Serve after shutdown.
	if err := r.Shutdown(ctx); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Serve(ln); err != server.ErrServerClosed {
		t.Fatalf("Serve after Shutdown = %v", err)
	}
}

// TestShutdownDeadline shuts down while a client is not reading its
// replies: the connection cannot finish, so Shutdown closes it when its
// context ends and returns the context's error.
func TestShutdownDeadline(t *testing.T) {
	r := serve(t, server.Config{MaxOutputBuffer: 64 << 10})
	r.store.Apply(store.AppendEntry(nil, store.OpSet, 0, []byte("big"), []byte(strings.Repeat("b", 1<<20))))
	sleeper := dialRaw(t, r.addr)
	sleeper.send(strings.Repeat(command("GET", "big"), 100))
	time.Sleep(100 * time.Millisecond) // let the server block on the write

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := r.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want context.DeadlineExceeded", err)
	}
	select {
	case err := <-r.served:
		if err != server.ErrServerClosed {
			t.Fatalf("Serve returned %v", err)
		}
	case <-time.After(liveness):
		t.Fatal("Serve did not return")
	}
	sleeper.SetReadDeadline(time.Now().Add(liveness))
	if _, err := io.Copy(io.Discard, sleeper.br); err != nil && !closedErr(err) {
		t.Fatalf("reading the closed connection: %v", err)
	}
}
