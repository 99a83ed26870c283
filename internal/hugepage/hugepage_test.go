package hugepage

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"testing"
	"time"
)

// maps is /proc/PID/maps of a Go process on a kernel that keeps no names
// for anonymous mappings, cut down: the heap is the block
// c000000000-c004800000, with the mapping before it, which touches it.
const maps = `00400000-00ae6000 r-xp 00000000 fe:00 10150773                           /tmp/flint
01792000-037d7000 rw-p 00000000 00:00 0
266dc000-266fd000 rw-p 00000000 00:00 0                                  [heap]
bffc000000-c000000000 rw-p 00000000 00:00 0
c000000000-c000400000 ---p 00000000 00:00 0
c000400000-c002000000 rw-p 00000000 00:00 0
c002000000-c004000000 ---p 00000000 00:00 0
c004000000-c004800000 rw-p 00000000 00:00 0
c004800000-c004900000 rw-p 00000000 fe:00 42                             /data/snap (deleted)
c004900000-c004a00000 rw-p 00000000 00:00 0
7ffc1e1d3000-7ffc1e1f4000 rw-p 00000000 00:00 0                          [stack]
`

// namedMaps is the same where the kernel keeps the names the runtime gives
// (CONFIG_ANON_VMA_NAME): the heap is in two places, and anonymous memory
// next to it is not part of it.
const namedMaps = `00400000-00ae6000 r-xp 00000000 fe:00 10150773                           /tmp/flint
bffc000000-c000000000 rw-p 00000000 00:00 0
c000000000-c000400000 ---p 00000000 00:00 0                          [anon: Go: heap reservation]
c000400000-c002000000 rw-p 00000000 00:00 0                          [anon: Go: heap]
c002000000-c004000000 ---p 00000000 00:00 0                          [anon: Go: heap reservation]
d000000000-d000800000 rw-p 00000000 00:00 0                          [anon: Go: heap]
7f0000000000-7f0000100000 rw-p 00000000 00:00 0                      [anon: Go: page summary]
`

func TestHeapSpans(t *testing.T) {
	for _, tc := range []struct {
		name, maps string
		addr       uintptr
		want       []span
	}{
		// bffc000000-c000000000 touches the block: unnamed anonymous memory
		// next to the heap is taken for part of it.
		{"unnamed", maps, 0xc000500000, []span{{0xbffc000000, 0xc000000000}, {0xc000400000, 0xc002000000}, {0xc004000000, 0xc004800000}}},
		{"named", namedMaps, 0xc000500000, []span{{0xc000400000, 0xc002000000}, {0xd000000000, 0xd000800000}}},
		{"named, whatever the address", namedMaps, 0x10, []span{{0xc000400000, 0xc002000000}, {0xd000000000, 0xd000800000}}},
	} {
		got, err := heapSpans([]byte(tc.maps), tc.addr)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: heapSpans = %x, %v; want %x", tc.name, got, err, tc.want)
		}
	}
	for _, addr := range []uintptr{0x500000, 0x266dc000, 0xc004880000, 0x7ffc1e1d4000, 0x10} {
		if got, err := heapSpans([]byte(maps), addr); err == nil {
			t.Errorf("heapSpans(%#x) = %x, want an error: no unnamed anonymous mapping holds it", addr, got)
		}
	}
}

func TestParseMapsRejectsMalformed(t *testing.T) {
	for _, line := range []string{
		"c000000000-c004000000 rw-p 00000000 00:00",
		"c000000000 rw-p 00000000 00:00 0",
		"c004000000-c000000000 rw-p 00000000 00:00 0",
		"c00000000g-c004000000 rw-p 00000000 00:00 0",
	} {
		if ms, err := parseMaps([]byte(line + "\n")); err == nil {
			t.Errorf("parseMaps(%q) = %v, want an error", line, ms)
		}
	}
}

// TestCollapse grows the heap, touching all of the new memory, and checks
// that Collapse collapses nothing while the heap grows, then at most
// maxTries huge pages a call, until the new memory is in huge pages; and,
// the heap grown again, that Collapse collapses nothing for as long as it
// measures the growth over, and that Keep then does the same for more. It
// runs in a child process, where no earlier test or run (with -count) has
// collapsed memory that the runtime would reuse for the new objects.
func TestCollapse(t *testing.T) {
	if err := Enabled(); err != nil {
		t.Skip(err)
	}
	if os.Getenv("FLINT_HUGEPAGE_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCollapse$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "FLINT_HUGEPAGE_CHILD=1")
		out, err := cmd.CombinedOutput()
		switch {
		case err != nil:
			t.Fatalf("child process: %v\n%s", err, out)
		case bytes.Contains(out, []byte("--- SKIP")):
			t.Skipf("child process skipped:\n%s", out)
		case !bytes.Contains(out, []byte("--- PASS")):
			t.Fatalf("child process did not run the test:\n%s", out)
		}
		return
	}
	base := hugeTotal(t)
	first := grow(t)
	if st, err := Collapse(); err != nil || st.Collapsed != 0 {
		t.Fatalf("Collapse just after the heap grew: %+v, %v; want nothing collapsed", st, err)
	}
	for i := 0; hugeTotal(t) < base+128<<20; i++ {
		st, err := Collapse()
		if errors.Is(err, ErrUnavailable) {
			t.Skip(err) // a kernel before 6.1
		}
		if err != nil || st.Tried > maxTries {
			t.Fatalf("Collapse: %+v, %v; want at most %d tries", st, err, maxTries)
		}
		if i == 2000 {
			t.Fatalf("after 2,000 calls, %d bytes in huge pages, from %d before 256 MiB were touched; want 128 MiB more at least", hugeTotal(t), base)
		}
	}
	base = hugeTotal(t)
	second := grow(t)
	for i := range settleCalls { // the ring holds a total from before the heap doubled
		if st, err := Collapse(); err != nil || st.Tried != 0 {
			t.Fatalf("Collapse %d calls after the heap grew again: %+v, %v; want nothing tried", i, st, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Keep(ctx, time.Millisecond, func(err error) { t.Error(err) }) }()
	for deadline := time.Now().Add(20 * time.Second); hugeTotal(t) < base+128<<20; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Keep left %d bytes in huge pages after 20 s, from %d before 256 MiB more were touched; want 128 MiB more at least", hugeTotal(t), base)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	runtime.KeepAlive(first)
	runtime.KeepAlive(second)
}

// grow allocates 256 MiB, more than the runtime keeps mapped in reserve,
// and touches each page of it.
func grow(t *testing.T) []byte {
	before := hugeTotal(t)
	b := make([]byte, 256<<20)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	if n := hugeTotal(t) - before; n > 16<<20 {
		t.Fatalf("touching 256 MiB of new heap added %d bytes in huge pages before any collapse; this test needs THP set to madvise", n)
	}
	return b
}

// hugeTotal returns Resident, or fails the test.
func hugeTotal(t *testing.T) int64 {
	t.Helper()
	n, err := Resident()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// BenchmarkCollapse measures one Collapse of a heap of 512 MiB that it has
// collapsed already: what Keep costs a server each interval once its heap
// has settled.
func BenchmarkCollapse(b *testing.B) {
	if err := Enabled(); err != nil {
		b.Skip(err)
	}
	heap := make([]byte, 512<<20)
	for i := 0; i < len(heap); i += 4096 {
		heap[i] = 1
	}
	for range 1000 {
		if _, err := Collapse(); err != nil {
			b.Skip(err)
		}
	}
	for b.Loop() {
		if _, err := Collapse(); err != nil {
			b.Fatal(err)
		}
	}
	runtime.KeepAlive(heap)
}

// TestGrowing feeds growing made-up totals: the heap counts as growing in
// the first settleCalls calls, then only while the total is more than a
// 64th above the one settleCalls calls before, and for exactly settleCalls
// calls after a jump.
func TestGrowing(t *testing.T) {
	state.Lock()
	defer state.Unlock()
	saved := state.seen
	savedLooks := state.looks
	defer func() { state.seen, state.looks = saved, savedLooks }()
	state.seen, state.looks = [settleCalls]uint64{}, 0

	steps := []struct {
		m     uint64
		times int
		want  bool
	}{
		{6400, settleCalls, true}, // no total settleCalls calls before
		{6400, 1, false},
		{6500, 1, false}, // exactly a 64th more than 6400
		{6501, 1, true},
		{6000, 1, false}, // shrunk
		{12800, settleCalls, true},
		{12800, 1, false}, // the jump is settleCalls calls before
	}
	call := 0
	for _, st := range steps {
		for range st.times {
			call++
			if got := growing(st.m); got != st.want {
				t.Fatalf("call %d: growing(%d) = %v; want %v", call, st.m, got, st.want)
			}
		}
	}
}
