package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/proctest"
	"github.com/flintkv/flint/internal/store"
	"github.com/flintkv/flint/internal/vfs"
	"github.com/flintkv/flint/internal/wal"
)

func batchOf(kv ...string) []byte {
	var b store.Batch
	for i := 0; i < len(kv); i += 2 {
		b.Add(store.OpSet, 0, []byte(kv[i]), []byte(kv[i+1]))
	}
	return b.Bytes()
}

// waitDead waits for the replica to stop by itself.
func waitDead(t *testing.T, r *Replica) {
	t.Helper()
	select {
	case <-r.Dead():
	case <-time.After(10 * time.Second):
		t.Fatal("the replica did not stop")
	}
}

func TestFsyncErrorStopsTheNode(t *testing.T) {
	for _, fault := range []string{"fsync", "write"} {
		t.Run(fault, func(t *testing.T) {
			mem := vfs.NewMem()
			ff := vfs.NewFaulty(mem)
			r := open(t, ff, Options{})
			set(t, r, "kept", "1")
			ff.SetFilter(func(name string) bool { return strings.HasSuffix(name, ".wal") })
			if fault == "fsync" {
				ff.FailSync(syscall.EIO)
			} else {
				ff.FailWrite(syscall.EIO)
			}
			if err := r.Apply(context.Background(), batchOf("lost", "2"), nil); !errors.Is(err, ErrStopped) {
				t.Fatalf("Apply after a failed %s = %v, want ErrStopped", fault, err)
			}
			waitDead(t, r)
			if err := r.Err(); !errors.Is(err, wal.ErrFailed) || !strings.Contains(err.Error(), "input/output error") {
				t.Fatalf("Err = %v, want the %s error", err, fault)
			}
			if err := r.Apply(context.Background(), batchOf("later", "3"), nil); !errors.Is(err, ErrStopped) {
				t.Fatalf("a later Apply = %v, want ErrStopped", err)
			}
			r = restartAfterPowerLoss(t, r, mem)
			defer r.Close()
			if got := get(t, r, "kept"); got != "1" {
				t.Fatalf("acknowledged write after restart = %s", got)
			}
		})
	}
}

// TestRestartAfterFailedFsync restarts a node that stopped on a failed
// fsync without a power loss, so that the page cache still holds the write
// the disk failed to take (vfs.Faulty models Linux's clean pages). The new
// node must not serve that write, which a later power loss would take away
// while keeping the writes acknowledged after it. (The new node runs in the
// same process, where Linux would keep the pages the old one mapped; Mem's
// DropCache drops them anyway, as for a new process.)
func TestRestartAfterFailedFsync(t *testing.T) {
	mem := vfs.NewMem()
	ff := vfs.NewFaulty(mem)
	r := open(t, ff, Options{})
	set(t, r, "kept", "1")
	ff.SetFilter(func(name string) bool { return strings.HasSuffix(name, ".wal") })
	ff.FailSync(syscall.EIO)
	if err := r.Apply(context.Background(), batchOf("failed", "2"), nil); !errors.Is(err, ErrStopped) {
		t.Fatalf("Apply after a failed fsync = %v, want ErrStopped", err)
	}
	waitDead(t, r)
	r.Close()
	ff.Heal()
	r = open(t, ff, Options{}) // no power loss
	if got := get(t, r, "failed"); got != "<nil>" {
		t.Fatalf("after a restart, the write whose fsync failed reads %q", got)
	}
	set(t, r, "after", "3")
	r = restartAfterPowerLoss(t, r, mem)
	defer r.Close()
	checkValues(t, "after a power loss", r, map[string]string{"kept": "1", "failed": "<nil>", "after": "3"})
}

func TestDiskFull(t *testing.T) {
	mem := vfs.NewMem()
	r := open(t, mem, Options{})
	defer r.Close()
	set(t, r, "before", "1")
	mem.SetCapacity(usage(mem) + 100)
	blocked := make(chan error, 1)
	go func() { // finds the disk full, and waits for space
		err := r.Apply(context.Background(), batchOf("big", strings.Repeat("x", 1000)), nil)
		blocked <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !r.noSpace.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the replica never noticed the full disk")
		}
		time.Sleep(time.Millisecond)
	}
	err := r.Apply(context.Background(), batchOf("refused", "1"), nil)
	if !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("Apply on a full disk = %v, want ErrNoSpace", err)
	}
	if got := get(t, r, "before"); got != "1" {
		t.Fatalf("read on a full disk = %s", got)
	}
	if info := strings.Join(r.PersistenceInfo(), "\n"); !strings.Contains(info, "disk_full:1") {
		t.Fatalf("INFO does not report the full disk:\n%s", info)
	}
	// A snapshot from a leader is refused at once: the log must write what
	// it holds first.
	snapMsg := raftpb.Message{Type: raftpb.MsgSnap, From: 2, To: 1, Snapshot: &raftpb.Snapshot{Metadata: raftpb.SnapshotMetadata{Index: 1000, Term: 5}}}
	if err := r.ReceiveSnapshot(2, 1, snapMsg, strings.NewReader("")); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("a snapshot sent on a full disk = %v, want ErrNoSpace", err)
	}
	mem.SetCapacity(0)
	if err := <-blocked; err != nil {
		t.Fatalf("the write that found the disk full = %v once space was freed, want success", err)
	}
	set(t, r, "after", "2")
	r = restartAfterPowerLoss(t, r, mem)
	defer r.Close()
	for k, v := range map[string]string{"before": "1", "big": strings.Repeat("x", 1000), "after": "2", "refused": "<nil>"} {
		if got := get(t, r, k); got != v {
			t.Fatalf("after restart %s = %.20s, want %.20s", k, got, v)
		}
	}
}

// TestOpenOnFullDisk starts a replica on a full disk at each write it must
// make before it serves: Open logs why it waits, and serves once space is
// freed, with every acknowledged write.
func TestOpenOnFullDisk(t *testing.T) {
	// Each fill leaves a data directory on mem, if any, and fills the disk.
	// It reports whether the directory holds the acknowledged write
	// before=1.
	for _, tc := range []struct {
		name string
		fill func(t *testing.T, mem *vfs.Mem) bool
	}{
		{"the new term", func(t *testing.T, mem *vfs.Mem) bool {
			r := open(t, mem, Options{})
			set(t, r, "before", "1")
			r.Close()
			mem.SetCapacity(usage(mem))
			return true
		}},
		{"a new data directory", func(t *testing.T, mem *vfs.Mem) bool {
			mem.SetCapacity(1)
			return false
		}},
		{"a torn segment start", func(t *testing.T, mem *vfs.Mem) bool {
			r := open(t, mem, Options{})
			set(t, r, "before", "1")
			next := r.wal.Metrics().LastIndex + 1
			r.Close()
			// A segment started, its start not yet written, as a power
			// loss during a rotation can leave it.
			names, _ := mem.ReadDir("data/wal")
			var seq uint64
			if _, err := fmt.Sscanf(names[len(names)-1], "%016x-", &seq); err != nil {
				t.Fatalf("segment name %s: %v", names[len(names)-1], err)
			}
			mem.WriteFile(fmt.Sprintf("data/wal/%016x-%016x.wal", seq+1, next), nil)
			mem.SetCapacity(usage(mem))
			return true
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			before := tc.fill(t, mem)
			r := openOnFullDisk(t, mem)
			defer r.Close()
			if got := get(t, r, "before"); before && got != "1" {
				t.Fatalf("acknowledged write after a start on a full disk = %s", got)
			}
			set(t, r, "after", "2")
		})
	}
}

// TestOpenWaitsToMakeItsDirectories fails the Mkdir of the log's directory
// for a full disk, as a full ext4 fails one: Open waits, and makes it once
// the disk has room.
func TestOpenWaitsToMakeItsDirectories(t *testing.T) {
	faulty := vfs.NewFaulty(vfs.NewMem())
	faulty.SetFilter(func(name string) bool { return name == "data/wal" })
	faulty.FailMkdir(vfs.ErrNoSpace)
	log := &proctest.Buffer{}
	opened := make(chan error, 1)
	var r *Replica
	go func() {
		var err error
		r, err = Open(Options{FS: faulty, Dir: "data", Logger: slog.New(slog.NewTextHandler(log, nil))})
		opened <- err
	}()
	awaitLog(t, log, opened)
	faulty.Heal()
	if err := awaitErr(t, opened, "Open once the disk had room"); err != nil {
		t.Fatalf("Open once the disk had room: %v", err)
	}
	defer r.Close()
	set(t, r, "k", "v")
}

// openOnFullDisk opens a replica on mem, whose disk is full: it checks that
// Open logs why it waits, frees the disk and returns the replica Open
// returns then.
func openOnFullDisk(t *testing.T, mem *vfs.Mem) *Replica {
	t.Helper()
	log := &proctest.Buffer{}
	var r *Replica
	opened := make(chan error, 1)
	go func() {
		var err error
		r, err = Open(Options{FS: mem, Dir: "data", Logger: slog.New(slog.NewTextHandler(log, nil))})
		opened <- err
	}()
	awaitLog(t, log, opened)
	mem.SetCapacity(0)
	if err := awaitErr(t, opened, "Open once space was freed"); err != nil {
		t.Fatalf("Open once space was freed: %v", err)
	}
	return r
}

// awaitLog waits until log says that Open, whose result opened receives,
// waits for disk space, and fails if Open returns first.
func awaitLog(t *testing.T, log *proctest.Buffer, opened <-chan error) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(log.String(), "cannot start serving until space is freed"); time.Sleep(time.Millisecond) {
		select {
		case err := <-opened:
			t.Fatalf("Open on a full disk returned %v before it logged why it waits", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("Open on a full disk logged nothing about it")
		}
	}
}

// TestDiskFullPartlyFreed fills the disk, then frees just enough for the
// write that found it full: the write goes through once the filesystem
// counts the space, not at its next try regardless (made a minute long).
func TestDiskFullPartlyFreed(t *testing.T) {
	defer func(d time.Duration) { maxSpaceWait = d }(maxSpaceWait)
	maxSpaceWait = time.Minute
	mem := vfs.NewMem()
	r := open(t, mem, Options{})
	defer r.Close()
	mem.SetCapacity(usage(mem) + 100)
	blocked := make(chan error, 1)
	go func() { blocked <- r.Apply(context.Background(), batchOf("big", strings.Repeat("x", 1000)), nil) }()
	for deadline := time.Now().Add(10 * time.Second); !r.noSpace.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the replica never noticed the full disk")
		}
	}
	time.Sleep(5 * retryNoSpace)
	mem.SetCapacity(usage(mem) + 64<<10)
	if err := awaitErr(t, blocked, "the write that found the disk full, once space was freed"); err != nil {
		t.Fatalf("the write that found the disk full = %v once space was freed", err)
	}
	checkValues(t, "after space was freed", r, map[string]string{"big": strings.Repeat("x", 1000)})
}

// TestWriteLargerThanTheFreeSpace sends a batch larger than the disk's
// free space. It is refused before the log takes it: once logged, an entry
// that can never be written would hold up every write after it, even with
// the disk nearly empty.
func TestWriteLargerThanTheFreeSpace(t *testing.T) {
	mem := vfs.NewMem()
	r := open(t, mem, Options{})
	set(t, r, "before", "1")
	mem.SetCapacity(usage(mem) + 4<<20)
	done := make(chan error, 1)
	go func() { done <- r.Apply(context.Background(), batchOf("big", strings.Repeat("x", 5<<20)), nil) }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "KiB are)") {
			t.Fatalf("Apply of 5 MiB with 4 MiB free = %v, want ErrNoSpace saying how much is free", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Apply of 5 MiB with 4 MiB free did not return")
	}
	set(t, r, "after", "2")
	set(t, r, "fits", strings.Repeat("y", 2<<20))
	r = restartAfterPowerLoss(t, r, mem)
	defer r.Close()
	checkValues(t, "after a power loss", r, map[string]string{
		"before": "1", "big": "<nil>", "after": "2", "fits": strings.Repeat("y", 2<<20)})
}

// awaitErr returns what c receives, failing the test if that takes over
// 10 s.
func awaitErr(t *testing.T, c <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-c:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no result after 10 s", what)
		return nil
	}
}

// usage returns the bytes the replica's files take on mem.
func usage(mem *vfs.Mem) int64 {
	used := int64(0)
	for _, dir := range []string{"data/wal", "data/snap"} {
		names, _ := mem.ReadDir(dir)
		for _, n := range names {
			b, _ := mem.ReadFile(dir + "/" + n)
			used += int64(len(b))
		}
	}
	return used
}

func TestStartupErrors(t *testing.T) {
	t.Run("damaged newest snapshot", func(t *testing.T) {
		mem := vfs.NewMem()
		r := open(t, mem, Options{SnapshotEntries: 5})
		for i := range 20 {
			set(t, r, "k", string(rune('a'+i)))
		}
		r.Close()
		names, _ := mem.ReadDir("data/snap")
		if len(names) != 2 {
			t.Fatalf("snapshots %v, want two", names)
		}
		newest := "data/snap/" + names[1]
		b, _ := mem.ReadFile(newest)
		mem.WriteFile(newest, b[:len(b)-10])
		_, err := Open(Options{FS: mem, Dir: "data", Logger: quiet()})
		if err == nil || !strings.Contains(err.Error(), newest) || !strings.Contains(err.Error(), "move "+names[1]) {
			t.Fatalf("Open = %v, want an error naming %s and advising to move it", err, newest)
		}
		mem.Remove(newest)
		r = open(t, mem, Options{})
		defer r.Close()
		if got := get(t, r, "k"); got != "t" {
			t.Fatalf("from the older snapshot and the log: k = %s, want t", got)
		}
	})
	t.Run("missing snapshot", func(t *testing.T) {
		mem := vfs.NewMem()
		r := open(t, mem, Options{})
		set(t, r, "k", "v")
		r.Close()
		names, _ := mem.ReadDir("data/snap")
		for _, n := range names {
			mem.Remove("data/snap/" + n)
		}
		if _, err := Open(Options{FS: mem, Dir: "data", Logger: quiet()}); err == nil || !strings.Contains(err.Error(), "snapshot is missing") {
			t.Fatalf("Open = %v, want a missing-snapshot error", err)
		}
	})
}

// A batch that does not decode is refused before it reaches the log, where
// it would stop the node now and at every restart; an empty one is not
// logged.
func TestMalformedBatchIsRefused(t *testing.T) {
	mem := vfs.NewMem()
	r := open(t, mem, Options{})
	set(t, r, "kept", "1")
	good := batchOf("a", "2")
	for name, batch := range map[string][]byte{
		"truncated":      good[:len(good)-1],
		"trailing bytes": append(append([]byte(nil), good...), 7),
		"unknown op":     func() []byte { b := append([]byte(nil), good...); b[2] = 0xee; return b }(),
	} {
		if err := r.Apply(context.Background(), batch, nil); !errors.Is(err, store.ErrBadEntry) {
			t.Fatalf("Apply of a %s batch = %v, want ErrBadEntry", name, err)
		}
	}
	before := r.applied.Load()
	if err := r.Apply(context.Background(), nil, nil); err != nil {
		t.Fatalf("Apply of an empty batch = %v", err)
	}
	if got := r.applied.Load(); got != before {
		t.Fatalf("an empty batch was logged: applied index %d, was %d", got, before)
	}
	set(t, r, "after", "3")
	r = restartAfterPowerLoss(t, r, mem)
	defer r.Close()
	checkValues(t, "after a restart", r, map[string]string{"kept": "1", "after": "3", "a": "<nil>"})
}

// checkValues checks that r holds want, each key's value or "<nil>".
func checkValues(t *testing.T, when string, r *Replica, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := get(t, r, k); got != v {
			t.Fatalf("%s %s = %q, want %q", when, k, got, v)
		}
	}
}

// removeFailsOnce is a Mem whose first Remove of a log segment fails.
type removeFailsOnce struct {
	*vfs.Mem
	mu     sync.Mutex
	failed string
}

func (f *removeFailsOnce) Remove(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failed == "" && strings.HasSuffix(name, ".wal") {
		f.failed = name
		return &os.PathError{Op: "remove", Path: name, Err: syscall.EIO}
	}
	return f.Mem.Remove(name)
}

// TestSegmentDeleteFails fails the deletion of a log segment that a
// snapshot covers. The node goes on, later snapshots delete it, and the
// directory opens with everything acknowledged.
func TestSegmentDeleteFails(t *testing.T) {
	fs := &removeFailsOnce{Mem: vfs.NewMem()}
	r := open(t, fs, Options{SnapshotEntries: 20, SegmentSize: 1 << 10})
	want := map[string]string{}
	for i := range 400 {
		k, v := fmt.Sprintf("k%03d", i), fmt.Sprint(i)
		set(t, r, k, v)
		want[k] = v
	}
	r.Close()
	if fs.failed == "" {
		t.Fatal("no segment was deleted")
	}
	r = restartAfterPowerLoss(t, r, fs.Mem)
	defer r.Close()
	checkValues(t, "after a failed segment delete and a restart", r, want)
}

// countWrites is an FS that counts the writes to log segments.
type countWrites struct {
	vfs.FS
	n atomic.Int64
}

func (c *countWrites) Create(name string) (vfs.File, error) { return c.wrap(c.FS.Create(name)) }
func (c *countWrites) OpenRW(name string) (vfs.File, error) { return c.wrap(c.FS.OpenRW(name)) }

func (c *countWrites) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &countedFile{File: f, n: &c.n}, nil
}

// countedFile is a file of a countWrites.
type countedFile struct {
	vfs.File
	n *atomic.Int64
}

func (f *countedFile) WriteAt(p []byte, off int64) (int, error) {
	f.n.Add(1)
	return f.File.WriteAt(p, off)
}

// TestFullQuotaBacksOff fails every write to the log as a full disk quota
// does, on a filesystem that cannot tell its free space: the retries of
// the write back off rather than come every retryNoSpace, and the write
// goes through once the quota allows it.
func TestFullQuotaBacksOff(t *testing.T) {
	ff := vfs.NewFaulty(vfs.NewMem())
	fs := &countWrites{FS: ff}
	r := open(t, fs, Options{})
	defer r.Close()
	set(t, r, "before", "1")
	ff.SetFilter(func(name string) bool { return strings.HasSuffix(name, ".wal") })
	ff.FailWrite(syscall.EDQUOT)
	blocked := make(chan error, 1)
	go func() { blocked <- r.Apply(context.Background(), batchOf("k", "v"), nil) }()
	start := fs.n.Load()
	time.Sleep(3 * time.Second)
	// Tries at about 0, 0.2, 0.6, 1.4 and 3 s; every 0.2 s would be 15.
	if tries := fs.n.Load() - start; tries > 8 {
		t.Fatalf("%d tries of the write in 3 s under a full quota", tries)
	}
	ff.Heal()
	if err := awaitErr(t, blocked, "the write, once the quota allows it"); err != nil {
		t.Fatalf("the write, once the quota allows it: %v", err)
	}
	checkValues(t, "after the quota allowed the write", r, map[string]string{"before": "1", "k": "v"})
}

// TestMissingLogWarns starts a replica whose log directory was emptied
// after a snapshot: it serves the snapshot and logs a warning that writes
// after it may be lost, where a new directory, which has no log either,
// logs none.
func TestMissingLogWarns(t *testing.T) {
	const warning = "the log directory holds no log"
	mem := vfs.NewMem()
	log := &proctest.Buffer{}
	r, err := Open(Options{FS: mem, Dir: "data", Logger: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(log.String(), warning) {
		t.Fatalf("a new directory logged:\n%s", log)
	}
	set(t, r, "k", "saved")
	if err := r.Snapshot(); err != nil {
		t.Fatal(err)
	}
	set(t, r, "k", "after the snapshot")
	r.Close()
	names, err := mem.ReadDir("data/wal")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if err := mem.Remove(path.Join("data/wal", n)); err != nil {
			t.Fatal(err)
		}
	}
	log = &proctest.Buffer{}
	r, err = Open(Options{FS: mem, Dir: "data", Logger: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !strings.Contains(log.String(), warning) {
		t.Fatalf("a log directory emptied after a snapshot did not log %q:\n%s", warning, log)
	}
	if v, _ := r.Store().Get([]byte("k")); string(v) != "saved" {
		t.Fatalf("k = %q, want the snapshot's", v)
	}
	set(t, r, "k", "new")
}
