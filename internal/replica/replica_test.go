package replica

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/flintkv/flint/internal/store"
	"github.com/flintkv/flint/internal/vfs"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func open(t *testing.T, fs vfs.FS, opt Options) *Replica {
	t.Helper()
	opt.FS, opt.Dir = fs, "data"
	if opt.Logger == nil {
		opt.Logger = quiet()
	}
	r, err := Open(opt)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// restartAfterPowerLoss closes r, drops everything mem did not make
// durable, and opens the replica again.
func restartAfterPowerLoss(t *testing.T, r *Replica, mem *vfs.Mem) *Replica {
	t.Helper()
	r.Close()
	mem.Crash()
	return open(t, mem, Options{})
}

func set(t *testing.T, r *Replica, kv ...string) []store.Result {
	t.Helper()
	var b store.Batch
	for i := 0; i < len(kv); i += 2 {
		b.Add(store.OpSet, 0, []byte(kv[i]), []byte(kv[i+1]))
	}
	var res []store.Result
	err := r.Apply(b.Bytes(), func(_ int, r store.Result) { res = append(res, r) })
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func get(t *testing.T, r *Replica, key string) string {
	t.Helper()
	if err := r.ReadBarrier(); err != nil {
		t.Fatal(err)
	}
	v, ok := r.Store().Get([]byte(key))
	if !ok {
		return "<nil>"
	}
	return string(v)
}

func TestApplyAndRestart(t *testing.T) {
	fs := vfs.NewMem()
	r := open(t, fs, Options{})
	if res := set(t, r, "a", "1", "b", "2"); len(res) != 2 || !res[0].Done {
		t.Fatalf("results %+v", res)
	}
	if got := get(t, r, "a"); got != "1" {
		t.Fatalf("a = %s", got)
	}
	r.Close()
	r = open(t, fs, Options{})
	defer r.Close()
	if got := get(t, r, "b"); got != "2" {
		t.Fatalf("after restart b = %s", got)
	}
}

func TestSnapshotsAndRelease(t *testing.T) {
	fs := vfs.NewMem()
	opt := Options{SnapshotEntries: 50, SegmentSize: 4 << 10}
	r := open(t, fs, opt)
	for i := range 500 {
		set(t, r, fmt.Sprintf("k%03d", i), fmt.Sprint(i))
	}
	r.Close()
	snaps, _ := fs.ReadDir("data/snap")
	segs, _ := fs.ReadDir("data/wal")
	if len(snaps) != 2 || len(segs) > 10 {
		t.Fatalf("snapshots %v, %d segments", snaps, len(segs))
	}
	r = open(t, fs, opt)
	defer r.Close()
	for i := range 500 {
		if got := get(t, r, fmt.Sprintf("k%03d", i)); got != fmt.Sprint(i) {
			t.Fatalf("k%03d = %s", i, got)
		}
	}
}
