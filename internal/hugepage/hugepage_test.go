package hugepage

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// maps is /proc/PID/maps of a Go process, cut down: the heap is the block
// c000000000-c004000000 and the mapping after it, which it touches.
const maps = `00400000-00ae6000 r-xp 00000000 fe:00 10150773                           /tmp/flint
01792000-037d7000 rw-p 00000000 00:00 0
266dc000-266fd000 rw-p 00000000 00:00 0                                  [heap]
bffc000000-c000000000 rw-p 00000000 00:00 0
c000000000-c000400000 ---p 00000000 00:00 0
c000400000-c002000000 rw-p 00000000 00:00 0
c002000000-c004000000 ---p 00000000 00:00 0
c004000000-c004800000 rw-p 00000000 00:00 0
c004800000-c004900000 rw-p 00000000 fe:00 42                             /data/snap
c004900000-c004a00000 rw-p 00000000 00:00 0
7ffc1e1d3000-7ffc1e1f4000 rw-p 00000000 00:00 0                          [stack]
`

func TestHeapSpans(t *testing.T) {
	got, err := heapSpans([]byte(maps), 0xc000500000)
	if err != nil {
		t.Fatal(err)
	}
	// bffc000000-c000000000 touches the block too: anonymous memory next to
	// the heap is taken for part of it.
	want := []span{{0xbffc000000, 0xc000000000}, {0xc000400000, 0xc002000000}, {0xc004000000, 0xc004800000}}
	if !slices.Equal(got, want) {
		t.Fatalf("heapSpans = %x, want %x", got, want)
	}
	for _, addr := range []uintptr{0x500000, 0x266dc000, 0xc004880000, 0x7ffc1e1d4000, 0x10} {
		if got, err := heapSpans([]byte(maps), addr); err == nil {
			t.Errorf("heapSpans(%#x) = %x, want an error: no anonymous mapping holds it", addr, got)
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

// TestAdvise advises this test's own heap and checks in /proc/self/smaps that
// the mapping holding a heap object carries the advice ("hg").
func TestAdvise(t *testing.T) {
	st, err := Advise()
	if errors.Is(err, syscall.EINVAL) {
		t.Skipf("this kernel has no transparent huge pages: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if st.Advised <= 0 {
		t.Fatalf("Advise covered %d bytes", st.Advised)
	}
	if flags := vmFlags(t, uintptr(unsafe.Pointer(anchor))); !slices.Contains(flags, "hg") {
		t.Fatalf("the heap's mapping has VmFlags %v, want hg among them", flags)
	}
}

// TestKeepAdvisesNewHeap grows the heap after a first Advise and checks that
// Advise collapses the new memory once it is in use and the heap has stopped
// growing, and that Keep advises memory mapped after it started. It runs in a child
// process: in this one, earlier tests (or runs, with -count) leave advised
// memory that the runtime would reuse for the new object.
func TestKeepAdvisesNewHeap(t *testing.T) {
	if os.Getenv("FLINT_HUGEPAGE_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKeepAdvisesNewHeap$", "-test.count=1", "-test.v")
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
	if _, err := Advise(); errors.Is(err, syscall.EINVAL) {
		t.Skipf("this kernel has no transparent huge pages: %v", err)
	}
	// New heap memory comes unadvised: a first object shows it.
	first := make([]byte, 256<<20) // more than the runtime keeps mapped in reserve
	if flags := vmFlags(t, addrOf(first)); slices.Contains(flags, "hg") {
		t.Fatalf("new heap memory was advised before Keep ran: VmFlags %v", flags)
	}
	// Touched before any advice, it is in small pages, until Advise
	// collapses them: not while the heap grows, then a few at a call.
	for i := 0; i < len(first); i += 4096 {
		first[i] = 1
	}
	if st, err := Advise(); err != nil || st.Collapsed != 0 {
		t.Fatalf("Advise just after the heap grew collapsed %d bytes (err %v), want none", st.Collapsed, err)
	}
	for i := 0; anonHuge(t, addrOf(first)) < 128<<20; i++ {
		st, err := Advise()
		if err != nil {
			t.Fatal(err)
		}
		if st.Collapsed > maxCollapse {
			t.Fatalf("Advise collapsed %d bytes, over maxCollapse", st.Collapsed)
		}
		if i == 1000 {
			t.Fatalf("after 1,000 Advise calls, the mapping of 256 MiB touched throughout has %d bytes in huge pages; want 128 MiB at least", anonHuge(t, addrOf(first)))
		}
	}
	// Memory mapped after an Advise must be advised by a later call.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Keep(ctx, time.Millisecond) }()
	time.Sleep(10 * time.Millisecond) // the first Advise of Keep runs at once
	second := make([]byte, 256<<20)
	waitAdvised(t, addrOf(second))
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	runtime.KeepAlive(first)
}

func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[len(b)/2])) }

// waitAdvised waits up to 10 s for the mapping that holds addr to be advised.
func waitAdvised(t *testing.T, addr uintptr) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Contains(vmFlags(t, addr), "hg") {
		if time.Now().After(deadline) {
			t.Fatalf("the mapping of a new heap object was not advised within 10 s: VmFlags %v", vmFlags(t, addr))
		}
		time.Sleep(time.Millisecond)
	}
}

// vmFlags returns the VmFlags of the mapping that holds addr, from
// /proc/self/smaps.
func vmFlags(t *testing.T, addr uintptr) []string {
	t.Helper()
	return strings.Fields(smapsField(t, addr, "VmFlags:"))
}

// anonHuge returns the AnonHugePages of the mapping that holds addr, in
// bytes, from /proc/self/smaps.
func anonHuge(t *testing.T, addr uintptr) int64 {
	t.Helper()
	f := strings.Fields(smapsField(t, addr, "AnonHugePages:"))
	kb, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || len(f) != 2 || f[1] != "kB" {
		t.Fatalf("AnonHugePages: %q", f)
	}
	return kb << 10
}

// smapsField returns what follows name in the lines of /proc/self/smaps
// about the mapping that holds addr.
func smapsField(t *testing.T, addr uintptr, name string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	in := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if r, _, ok := strings.Cut(line, " "); ok && strings.Contains(r, "-") && !strings.HasSuffix(r, ":") {
			lo, hi, _ := strings.Cut(r, "-")
			a, errA := strconv.ParseUint(lo, 16, 64)
			b, errB := strconv.ParseUint(hi, 16, 64)
			in = errA == nil && errB == nil && uintptr(a) <= addr && addr < uintptr(b)
		}
		if f, ok := strings.CutPrefix(line, name); ok && in {
			return f
		}
	}
	t.Fatalf("no mapping in /proc/self/smaps holds %#x, or it has no %s", addr, name)
	return ""
}

// BenchmarkAdvise measures one Advise of a heap of 512 MiB that it has
// already advised and collapsed: what Keep costs a server each interval
// once its heap stops growing.
func BenchmarkAdvise(b *testing.B) {
	heap := make([]byte, 512<<20)
	for i := 0; i < len(heap); i += 4096 {
		heap[i] = 1
	}
	if _, err := Advise(); err != nil {
		b.Skip(err)
	}
	for b.Loop() {
		if _, err := Advise(); err != nil {
			b.Fatal(err)
		}
	}
	runtime.KeepAlive(heap)
}
