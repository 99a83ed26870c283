package main

import (
	"context"
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

// TestServeSaveAndRestart writes, snapshots with SAVE and BGSAVE, stops
// with SIGTERM, and starts again on the same directory.
func TestServeSaveAndRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	srv := proctest.Serve(t, flintBin, "--dir", dir)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	for i := range 100 {
		if err := c.Set(ctx, fmt.Sprint("k", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := c.Do(ctx, "SAVE").Text(); err != nil || got != "OK" {
		t.Fatalf("SAVE = %q, %v", got, err)
	}
	info := c.Info(ctx, "persistence").Val()
	if !strings.Contains(info, "durable:1") || strings.Contains(info, "last_snapshot_index:1\r") {
		t.Fatalf("INFO persistence after SAVE:\n%s", info)
	}
	if got, err := c.Do(ctx, "BGSAVE").Text(); err != nil || got != "Background saving started" {
		t.Fatalf("BGSAVE = %q, %v", got, err)
	}
	checkBGSAVEs(t, c)
	c.Set(ctx, "after-save", "v", 0)
	c.Close()
	srv.Cmd.Process.Signal(syscall.SIGTERM)
	if err := srv.Cmd.Wait(); err != nil {
		t.Fatalf("exit: %v", err)
	}
	srv = proctest.Serve(t, flintBin, "--dir", dir)
	c = redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	if n := c.DBSize(ctx).Val(); n != 101 {
		t.Fatalf("DBSIZE after restart = %d, want 101", n)
	}
	if v := c.Get(ctx, "k42").Val(); v != "42" {
		t.Fatalf("k42 = %q", v)
	}
}

// checkBGSAVEs sends BGSAVEs and BGSAVE SCHEDULEs pipelined: each starts a
// snapshot or, while one is written, fails as Redis's does; then it waits
// for the snapshots to end.
func checkBGSAVEs(t *testing.T, c *redis.Client) {
	t.Helper()
	ctx := context.Background()
	p := c.Pipeline()
	var cmds []*redis.Cmd
	for i := range 200 {
		args := []any{"BGSAVE"}
		if i%2 == 1 {
			args = append(args, "SCHEDULE")
		}
		cmds = append(cmds, p.Do(ctx, args...))
	}
	p.Exec(ctx) // each command's reply is checked below
	for _, cmd := range cmds {
		got, err := cmd.Text()
		started := err == nil && got == "Background saving started"
		if !started && (err == nil || err.Error() != "ERR Background save already in progress") {
			t.Fatalf("%v = %q, %v", cmd.Args(), got, err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		info := c.Info(ctx, "persistence").Val()
		if strings.Contains(info, "rdb_bgsave_in_progress:0") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a snapshot still in progress 10 s after the BGSAVEs:\n%s", info)
		}
	}
}

// TestServeRefusesSharedDirectory: a second server on a data directory in
// use exits with status 1 and says why, and the first goes on serving.
func TestServeRefusesSharedDirectory(t *testing.T) {
	dir := t.TempDir()
	srv := proctest.Serve(t, flintBin, "--dir", dir)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	ctx := context.Background()
	if err := c.Set(ctx, "k", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// Bounded: a second server that starts would serve until killed.
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(sctx, flintBin, "serve", "--addr", proctest.FreeAddr(t), "--dir", dir).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("a second serve on the same directory: %v, want exit status 1\n%s", err, out)
	}
	if !strings.Contains(string(out), "another process is using it") {
		t.Fatalf("a second serve on the same directory does not say why it stopped:\n%s", out)
	}
	if v, err := c.Get(ctx, "k").Result(); err != nil || v != "1" {
		t.Fatalf("the first server after the second tried: k = %q, %v", v, err)
	}
}

// TestServeRefusesDamagedDirectory: a damaged snapshot stops startup with
// exit status 1 and a message naming the file.
func TestServeRefusesDamagedDirectory(t *testing.T) {
	dir := t.TempDir()
	srv := proctest.Serve(t, flintBin, "--dir", dir)
	srv.Cmd.Process.Signal(syscall.SIGTERM)
	srv.Cmd.Wait()
	snaps, _ := filepath.Glob(filepath.Join(dir, "snap", "*.snap"))
	if len(snaps) != 1 {
		t.Fatalf("snapshots %v", snaps)
	}
	b, _ := os.ReadFile(snaps[0])
	b[len(b)-12] ^= 0xff
	os.WriteFile(snaps[0], b, 0o644)
	out, err := exec.Command(flintBin, "serve", "--addr", proctest.FreeAddr(t), "--dir", dir).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("serve on a damaged directory: %v, want exit status 1\n%s", err, out)
	}
	if !strings.Contains(string(out), filepath.Base(snaps[0])) || !strings.Contains(string(out), "checksum") {
		t.Fatalf("the error does not name the file and the damage:\n%s", out)
	}
}
