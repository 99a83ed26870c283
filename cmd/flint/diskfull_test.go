package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flintkv/flint/internal/proctest"
)

// TestServeDiskFull runs flint serve on a 4 MiB tmpfs until the disk is
// full: writes are refused with a clear error while reads go on, writes
// resume once space is freed, and nothing acknowledged is lost. It needs to
// mount a tmpfs (root), and skips otherwise.
func TestServeDiskFull(t *testing.T) {
	mnt, filler := smallDisk(t)
	dir := filepath.Join(mnt, "data")
	srv := proctest.Serve(t, flintBin, "--dir", dir)
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, ReadTimeout: time.Second, PoolSize: 4})
	defer c.Close()
	val := strings.Repeat("v", 4096)
	acked, _ := fillDisk(t, c, val)
	if v, err := c.Get(ctx, "k0").Result(); err != nil || v != val {
		t.Fatalf("GET on a full disk: %.10q, %v", v, err)
	}
	os.Remove(filler)
	deadline := time.Now().Add(10 * time.Second)
	for c.Set(ctx, "after", "1", 0).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatal("writes did not resume after space was freed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	srv.Cmd.Process.Signal(syscall.SIGTERM)
	if err := srv.Cmd.Wait(); err != nil {
		t.Fatalf("exit: %v", err)
	}
	srv = proctest.Serve(t, flintBin, "--dir", dir)
	c2 := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c2.Close()
	for i := range acked {
		if v, err := c2.Get(ctx, fmt.Sprint("k", i)).Result(); err != nil || v != val {
			t.Fatalf("after restart k%d: %.10q, %v", i, v, err)
		}
	}
	if v := c2.Get(ctx, "after").Val(); v != "1" {
		t.Fatalf("after restart, after = %q", v)
	}
}

// TestServeStopsOnFullDisk sends SIGTERM while a write waits for disk
// space: flint serve stops after --shutdown-timeout rather than waiting for
// the space, and what was acknowledged survives.
func TestServeStopsOnFullDisk(t *testing.T) {
	mnt, filler := smallDisk(t)
	dir := filepath.Join(mnt, "data")
	srv := proctest.Serve(t, flintBin, "--dir", dir, "--shutdown-timeout", "500ms")
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, ReadTimeout: time.Second, PoolSize: 4})
	defer c.Close()
	val := strings.Repeat("v", 4096)
	acked, waiting := fillDisk(t, c, val)
	if !waiting {
		t.Fatal("no write was left waiting for space")
	}
	srv.Cmd.Process.Signal(syscall.SIGTERM)
	exited := make(chan error, 1)
	go func() { exited <- srv.Cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit: %v", err)
		}
	case <-time.After(10 * time.Second):
		os.Remove(filler)
		t.Fatal("still running 10 s after SIGTERM, with a write waiting for space")
	}
	os.Remove(filler)
	srv = proctest.Serve(t, flintBin, "--dir", dir)
	c2 := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c2.Close()
	for i := range acked {
		if v, err := c2.Get(context.Background(), fmt.Sprint("k", i)).Result(); err != nil || v != val {
			t.Fatalf("after restart k%d: %.10q, %v", i, v, err)
		}
	}
}

// TestServeStartsOnFullDisk starts flint serve with a new data directory on
// a disk with no space left, or no inode left, which a new directory needs
// on tmpfs: it says why it cannot start, and starts once space is freed. It
// needs to mount a tmpfs (root), and skips otherwise.
func TestServeStartsOnFullDisk(t *testing.T) {
	t.Run("no space", func(t *testing.T) {
		mnt, filler := smallDisk(t)
		fillFile(t, filepath.Join(mnt, "rest"))
		startOnFullDisk(t, mnt, func() { os.Remove(filler) })
	})
	t.Run("no inode", func(t *testing.T) {
		mnt := mountTmpfs(t, "size=4m,nr_inodes=32")
		var files []string
		for i := 0; ; i++ {
			name := filepath.Join(mnt, fmt.Sprint("f", i))
			if err := os.WriteFile(name, nil, 0o644); err != nil {
				break
			}
			files = append(files, name)
		}
		startOnFullDisk(t, mnt, func() {
			for _, f := range files {
				os.Remove(f)
			}
		})
	})
}

// startOnFullDisk starts flint serve with the data directory mnt/data on a
// full disk, checks that it logs why it waits, calls free, and checks that
// it then serves.
func startOnFullDisk(t *testing.T, mnt string, free func()) {
	t.Helper()
	// If another process takes FreeAddr's address before the server binds
	// it, the server exits and the test fails saying so: unlike
	// proctest.Serve, it cannot simply start again, as the disk is freed
	// by then.
	addr := proctest.FreeAddr(t)
	logs := &proctest.Buffer{}
	cmd := exec.Command(flintBin, "serve", "--addr", addr, "--dir", filepath.Join(mnt, "data"))
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("flint serve logs:\n%s", logs.String())
		}
	}()
	awaitRunning(t, exited, "flint serve to log why it waits", func() bool {
		return strings.Contains(logs.String(), "cannot start serving until space is freed")
	})
	free()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	awaitRunning(t, exited, "flint serve to start once space was freed", func() bool {
		ours, _ := proctest.Listens(cmd.Process.Pid, addr) // not another process's, which FreeAddr cannot rule out
		return ours && c.Set(context.Background(), "k", "v", 0).Err() == nil
	})
	if v, err := c.Get(context.Background(), "k").Result(); err != nil || v != "v" {
		t.Fatalf("GET k = %q, %v", v, err)
	}
}

// fillFile writes name until the disk is full.
func fillFile(t *testing.T, name string) {
	t.Helper()
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for err == nil {
		_, err = f.Write(make([]byte, 4096))
	}
}

// awaitRunning waits up to 20 s for cond, checking every 20 ms, and fails
// if the process whose exit exited reports ends first.
func awaitRunning(t *testing.T, exited chan error, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-exited:
			exited <- err // for the deferred wait
			t.Fatalf("flint serve exited (%v) while waiting for %s", err, what)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s in 20 s", what)
		}
	}
}

// smallDisk mounts a 4 MiB tmpfs, three quarters full with the file filler,
// or skips the test if it cannot (that needs root).
func smallDisk(t *testing.T) (mnt, filler string) {
	mnt = mountTmpfs(t, "size=4m")
	filler = filepath.Join(mnt, "filler")
	if err := os.WriteFile(filler, make([]byte, 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	return mnt, filler
}

// mountTmpfs mounts a tmpfs with the mount options opts, to be unmounted
// when the test ends, or skips the test if it cannot (that needs root).
func mountTmpfs(t *testing.T, opts string) string {
	t.Helper()
	mnt := filepath.Join(t.TempDir(), "mnt")
	os.Mkdir(mnt, 0o755)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", opts, "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	return mnt
}

// fillDisk writes keys k0, k1, ... of val until a write is refused for a
// full disk. It returns how many were acknowledged, and whether a write
// timed out instead: the write that found the disk full waits for space.
func fillDisk(t *testing.T, c *redis.Client, val string) (acked int, waiting bool) {
	for i := 0; i < 2000; i++ {
		err := c.Set(context.Background(), fmt.Sprint("k", i), val, 0).Err()
		switch {
		case err == nil:
			acked = i + 1
		case strings.Contains(err.Error(), "no space left on device"):
			if acked == 0 {
				t.Fatal("the first write was refused for a full disk")
			}
			t.Logf("%d writes of %d bytes acknowledged before the disk filled", acked, len(val))
			return acked, waiting
		case errors.Is(err, os.ErrDeadlineExceeded) || strings.Contains(err.Error(), "i/o timeout"):
			waiting = true
		default:
			t.Fatalf("SET k%d: %v", i, err)
		}
	}
	t.Fatalf("after %d acknowledged writes, no write was refused for a full disk", acked)
	return
}
