package node

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flintkv/flint/internal/replica"
	"github.com/flintkv/flint/internal/server"
	"github.com/flintkv/flint/internal/vfs"
)

// TestServeFailsOnErrorDuringShutdown stops the server while a write waits
// for disk space, then fails the disk: serve must return ErrFailed, as for
// a failure before the shutdown, not nil.
func TestServeFailsOnErrorDuringShutdown(t *testing.T) {
	disk := vfs.NewFaulty(vfs.NewMem())
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	rep, err := replica.Open(replica.Options{FS: disk, Dir: "data", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(server.Config{Addr: "127.0.0.1:0", Logger: quiet}, rep)
	ctx, stop := context.WithCancel(context.Background())
	code := make(chan error, 1)
	go func() { code <- serve(ctx, srv, rep, 5*time.Second, quiet) }()
	addr := listening(t, srv)
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	if err := c.Set(context.Background(), "a", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	disk.FailWrite(syscall.ENOSPC)
	waiting := make(chan error, 1)
	go func() { waiting <- c.Set(context.Background(), "b", "2", 0).Err() }()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(strings.Join(rep.PersistenceInfo(), " "), "disk_full:1"); {
		if time.Now().After(deadline) {
			t.Fatal("the write never found the disk full")
		}
		time.Sleep(time.Millisecond)
	}
	stop() // as SIGTERM does
	disk.FailWrite(syscall.EIO)
	select {
	case got := <-code:
		if !errors.Is(got, ErrFailed) {
			t.Fatalf("serve returned %v after the log failed during shutdown, want ErrFailed", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return after the log failed during shutdown")
	}
	if err := <-waiting; err == nil {
		t.Fatal("the write that waited for space succeeded on a failed log")
	}
}

// listening returns srv's address once it listens.
func listening(t *testing.T, srv *server.Server) string {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if a := srv.Addr(); a != nil {
			return a.String()
		}
		if time.Now().After(deadline) {
			t.Fatal("the server never listened")
		}
	}
}
