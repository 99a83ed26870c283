package replica

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flintkv/flint/internal/vfs"
)

// TestMappedValuesOutliveTheirFiles restarts on the OS filesystem, where the
// store keeps the values it loads as slices of the mapped snapshot and log,
// then snapshots until every file it loaded from has been deleted: the
// values stay right, and so does the next restart.
func TestMappedValuesOutliveTheirFiles(t *testing.T) {
	opt := Options{FS: vfs.OS, Dir: t.TempDir(), Logger: quiet(), SegmentSize: 16 << 10}
	want := map[string]string{}
	write := func(r *Replica, from, to int, tag string) {
		for i := from; i < to; i++ {
			k, v := fmt.Sprintf("k%03d", i), fmt.Sprintf("%s-%d-%s", tag, i, strings.Repeat("v", i%300))
			set(t, r, k, v)
			want[k] = v
		}
	}
	check := func(r *Replica, when string) {
		t.Helper()
		for k, v := range want {
			if got := get(t, r, k); got != v {
				t.Fatalf("%s: %s = %q, want %q", when, k, got, v)
			}
		}
	}
	r := mustOpen(t, opt)
	write(r, 0, 200, "snap")
	if err := r.Snapshot(); err != nil {
		t.Fatal(err)
	}
	write(r, 100, 300, "log")
	r.Close()

	loaded := files(t, opt.Dir)
	r = mustOpen(t, opt)
	check(r, "after restart")
	write(r, 250, 260, "new")
	for i := range 3 { // each round rolls over a segment or more
		write(r, 1000+100*i, 1100+100*i, "more")
		if err := r.Snapshot(); err != nil {
			t.Fatal(err)
		}
	}
	if left := slices.DeleteFunc(files(t, opt.Dir), func(f string) bool { return !slices.Contains(loaded, f) }); len(left) > 0 {
		t.Fatalf("files loaded at startup still there after three snapshots: %v", left)
	}
	write(r, 0, 5, "after")
	check(r, "after the loaded files were deleted")
	r.Close()
	r = mustOpen(t, opt)
	defer r.Close()
	check(r, "after the second restart")
}

func mustOpen(t *testing.T, opt Options) *Replica {
	t.Helper()
	r, err := Open(opt)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// files lists the snapshot and log files under dir.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	for _, pattern := range []string{"snap/*.snap", "wal/*.wal"} {
		m, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, m...)
	}
	if len(names) == 0 {
		t.Fatalf("no snapshot or log files in %s", dir)
	}
	return names
}
