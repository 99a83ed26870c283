package client_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flintkv/flint/client"
	"github.com/flintkv/flint/internal/server"
)

// silentServer accepts connections and, but for the CLUSTER SLOTS that New
// sends, never answers: it replies to that with an error, as a server
// without cluster support does, then reads nothing more except the next
// byte, after which it sends on arrived (if not nil) without blocking.
func silentServer(t *testing.T, arrived chan<- struct{}) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
			go answerClusterSlots(nc, arrived)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, nc := range conns {
			nc.Close()
		}
	})
	return ln.Addr().String()
}

func answerClusterSlots(nc net.Conn, arrived chan<- struct{}) {
	const clusterMap = "*2\r\n$7\r\nCLUSTER\r\n$4\r\nINFO\r\n*2\r\n$7\r\nCLUSTER\r\n$5\r\nSLOTS\r\n"
	buf := make([]byte, len(clusterMap))
	if _, err := io.ReadFull(nc, buf); err != nil || string(buf) != clusterMap {
		return // not the connection New asked CLUSTER INFO and SLOTS on
	}
	if _, err := io.WriteString(nc, strings.Repeat("-ERR unknown command 'CLUSTER'\r\n", 2)); err != nil {
		return
	}
	if _, err := nc.Read(buf[:1]); err == nil && arrived != nil {
		arrived <- struct{}{}
	}
}

func TestTimeoutUnansweredCall(t *testing.T) {
	noLeaks(t)
	arrived := make(chan struct{}, 1)
	c, err := client.New(silentServer(t, arrived), client.WithPoolSize(1))
	must(t, err)
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = c.Get(ctx, "k")
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Get returned after %v, long after its deadline", d)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get from a silent server: err %v, want DeadlineExceeded", err)
	}
	// On a loaded machine the deadline may pass before the writer runs.
	// Either way, the error must say whether the request was written.
	select {
	case <-arrived:
		if !errors.Is(err, client.ErrUnknownOutcome) {
			t.Fatalf("Get written to a silent server: err %v, want ErrUnknownOutcome", err)
		}
	case <-time.After(time.Second):
		if errors.Is(err, client.ErrUnknownOutcome) {
			t.Fatalf("Get never written: err %v, want no ErrUnknownOutcome", err)
		}
	}

	done, stop := context.WithCancel(context.Background())
	stop()
	_, err = c.Get(done, "k")
	if !errors.Is(err, context.Canceled) || errors.Is(err, client.ErrUnknownOutcome) {
		t.Fatalf("Get with a canceled context: err %v, want Canceled and not ErrUnknownOutcome", err)
	}
}

// TestTimeoutQueuedCall checks that a call whose context ends before it is
// written reports that it was not sent. The writer is kept busy with a
// value larger than the socket buffers, which the silent server never reads.
func TestTimeoutQueuedCall(t *testing.T) {
	noLeaks(t)
	arrived := make(chan struct{}, 1)
	c, err := client.New(silentServer(t, arrived), client.WithPoolSize(1))
	must(t, err)
	big := make(chan error, 1)
	go func() { big <- c.Set(context.Background(), "big", make([]byte, 64<<20)) }()
	<-arrived // the writer is writing the big value, and will be for ever

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = c.Get(ctx, "k")
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, client.ErrUnknownOutcome) {
		t.Fatalf("Get queued behind a stuck write: err %v, want DeadlineExceeded and not ErrUnknownOutcome", err)
	}
	c.Close()
	if err := <-big; !errors.Is(err, client.ErrUnknownOutcome) || !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Set interrupted by Close: err %v, want ErrUnknownOutcome and ErrClosed", err)
	}
}

// TestServerShutdown stops the server under load: calls in flight fail with
// ErrUnknownOutcome; calls not sent are retried until their context ends,
// and then fail with ErrConnect, and nothing else.
func TestServerShutdown(t *testing.T) {
	srv, c := connect(t, server.Config{}, client.WithPoolSize(2))
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	const workers = 16
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for {
				if _, err := c.Incr(ctx, "n"); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	srv.Stop(t)
	time.Sleep(50 * time.Millisecond) // the calls not sent retry meanwhile
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, client.ErrUnknownOutcome) && !errors.Is(err, client.ErrConnect) && !errors.Is(err, context.Canceled) {
			t.Errorf("call during shutdown: err %v, want ErrUnknownOutcome, or ErrConnect or Canceled", err)
		}
	}
	short, stop := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer stop()
	_, err := c.Get(short, "n")
	if !errors.Is(err, client.ErrConnect) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, client.ErrUnknownOutcome) {
		t.Fatalf("Get after shutdown: err %v, want ErrConnect and DeadlineExceeded, not ErrUnknownOutcome", err)
	}
}

// TestReconnect breaks the connection with QUIT and checks that a later
// call gets a new one.
func TestReconnect(t *testing.T) {
	_, c := connect(t, server.Config{}, client.WithPoolSize(1))
	ctx := ctxT(t)
	must(t, c.Set(ctx, "k", []byte("v")))
	if _, err := c.Do(ctx, "QUIT"); err != nil {
		t.Fatalf("QUIT: %v", err)
	}
	var err error
	for range 100 { // until the reader has seen the connection close
		var v []byte
		if v, err = c.Get(ctx, "k"); err == nil {
			if string(v) != "v" {
				t.Fatalf("Get after reconnecting = %q, want v", v)
			}
			return
		}
		if !errors.Is(err, client.ErrUnknownOutcome) {
			t.Fatalf("Get on a connection the server closed: err %v, want ErrUnknownOutcome", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no new connection: %v", err)
}
