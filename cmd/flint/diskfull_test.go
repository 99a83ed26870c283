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

	"github.com/flintkv/flint/internal/procnet"
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
		ours, _ := procnet.Listens(cmd.Process.Pid, addr) // not another process's, which FreeAddr cannot rule out
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
func smallDisk(t *testing.T) (mnt, filler string) { return nearlyFullDisk(t, 4, 1) }

// nearlyFullDisk mounts a tmpfs of size MiB with all but free MiB taken by
// the file filler, or skips the test if it cannot (that needs root).
func nearlyFullDisk(t *testing.T, size, free int) (mnt, filler string) {
	mnt = mountTmpfs(t, fmt.Sprintf("size=%dm", size))
	filler = filepath.Join(mnt, "filler")
	if err := os.WriteFile(filler, make([]byte, (size-free)<<20), 0o644); err != nil {
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

// TestFollowerDiskFull runs a group of three whose member 3 has its data
// directory on a tmpfs with 1 MiB free, and fills that disk with writes
// through the leader: the writes go on being acknowledged (members 1 and 2
// are a majority), while member 3's match index at the leader stops, and
// it stays up and answers. Meanwhile the leader takes snapshots and drops
// the log member 3 lacks; member 3 refuses the snapshot until space is
// freed. Once it is, member 3 catches up (from the leader's snapshot) and
// holds every acknowledged write, also after a kill -9 and a restart. It
// needs to mount a tmpfs (root), and skips otherwise.
func TestFollowerDiskFull(t *testing.T) {
	// Room, once freed, for member 3's log and two snapshots as the disk
	// filled, and the leader's snapshot, which it must write before it
	// drops them.
	mnt, filler := nearlyFullDisk(t, 16, 1)
	g := newGroup(t, 3)
	g.dirs[2] = filepath.Join(mnt, "m3")
	g.args = []string{"--snapshot-entries", "200"}
	for i := range 3 {
		g.start(i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	all := strings.Join(g.addrs, ",")
	if g.leader(ctx) == 2 {
		if out, code := runFlint(t, flintBin, nil, "cluster", "transfer", "1", "--addr", all); code != 0 {
			t.Fatalf("flint cluster transfer 1: exit %d\n%s", code, out)
		}
	}
	cc := clusterClient(g.addrs)
	defer cc.Close()
	val := strings.Repeat("v", 2048)
	acked := 0
	write := func(n int) {
		t.Helper()
		for range n {
			if err := cc.Set(ctx, fmt.Sprint("k", acked), val, 0).Err(); err != nil {
				t.Fatalf("SET k%d with member 3's disk full: %v", acked, err)
			}
			acked++
		}
	}
	for !strings.Contains(g.logs[2].String(), "the disk is full") {
		if acked >= 2000 {
			t.Fatal("member 3 did not log a full disk after 2000 writes of 2 KiB")
		}
		write(50)
	}
	time.Sleep(200 * time.Millisecond) // for the acknowledgments on their way
	stuck := followerState(t, all, 3).match
	write(500)
	time.Sleep(2 * time.Second) // for the leader to send its snapshot, again and again
	if s := followerState(t, all, 3); s.match != stuck || s.role != "follower" {
		t.Fatalf("member 3, its disk full, is %+v; want a follower whose match index stays %s", s, stuck)
	}
	t.Logf("%d writes acknowledged; member 3's match index stays %s", acked, stuck)
	// The leader waits longer after each refusal (snapshotRetryMin doubling);
	// at each heartbeat it would be a hundred.
	if n := strings.Count(g.logs[2].String(), "takes no snapshot until"); n == 0 || n > 20 {
		t.Errorf("member 3 refused the leader's snapshot %d times while its disk was full; want 1 to 20", n)
	}

	os.Remove(filler)
	for deadline := time.Now().Add(30 * time.Second); followerState(t, all, 3).lag != "0"; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("member 3 did not catch up in 30 s after space was freed: %+v", followerState(t, all, 3))
		}
	}
	logs := g.logs[2].String()
	if !strings.Contains(logs, "this member stops acknowledging its leader's entries") ||
		!strings.Contains(logs, "disk space is available again: catching up with the leader") {
		t.Errorf("member 3 did not log that it stopped acknowledging, then caught up:\n%s", logs)
	}
	readAll(t, g.addrs[2], acked, val)
	g.kill(2)
	g.start(2)
	readAll(t, g.addrs[2], acked, val)
}

// followerState returns member id's line of flint cluster status, once
// the group has a leader.
func followerState(t *testing.T, addrs string, id uint64) statusRow {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		rows, _ := clusterStatus(t, addrs)
		if _, ok := statusIs(rows, 0, []uint64{1, 2, 3}); ok {
			return rows[id]
		}
	}
	t.Fatal("no leader, or a member down, for 20 s")
	return statusRow{}
}

// readAll reads k0 to k<n-1> at the member at addr (READONLY, through the
// leader's read index) and fails unless each is val.
func readAll(t *testing.T, addr string, n int, val string) {
	t.Helper()
	c := readOnlyClient(t, addr)
	for k := range n {
		if v, err := c.Get(context.Background(), fmt.Sprint("k", k)).Result(); err != nil || v != val {
			t.Fatalf("member at %s: k%d = %.10q (%v)", addr, k, v, err)
		}
	}
}
