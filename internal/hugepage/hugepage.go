// Package hugepage moves the settled parts of the Go heap into transparent
// huge pages.
//
// A store of a million keys reads and writes its hash tables, cells and index
// at random places across hundreds of megabytes. With 4 KiB pages nearly
// every such access also misses the TLB, and in a virtual machine each miss
// walks two page tables, the guest's and the host's. With 2 MiB pages the
// same heap needs 512 times fewer TLB entries.
//
// The Go runtime leaves the choice to the system, and on the common setting
// "madvise" (/sys/kernel/mm/transparent_hugepage/enabled) its heap gets no
// huge pages. Advising the heap with MADV_HUGEPAGE would get them as pages
// are first touched, but would also let the kernel's khugepaged gather back
// into huge pages memory that the runtime has returned to the system (one
// resident small page in 2 MiB is enough), which grows the process past what
// the runtime sees or GOMEMLIMIT can limit; the runtime stopped advising its
// heap for that reason (golang/go#61718). So Collapse advises nothing. Once
// the heap has stopped growing, it collapses (MADV_COLLAPSE, Linux 6.1 and
// later) aligned 2 MiB of the heap whose small pages are nearly all resident
// (see dense) into huge pages, one at a call: a collapse holds the
// process's memory map while it copies, and stalls the page faults that a
// growing heap takes many of. So a call collapses nothing if the memory
// the runtime has mapped changed since the last call, nor if it is more than
// a 64th above what it was settleCalls calls before. The first test alone
// would pass a heap that grows slowly, which maps more memory only now and
// then; the second passes a heap that has settled, which still maps a
// little now and then. A 64th is relative: a heap of 4 GiB that grows by 60
// MiB a second counts as settled. Memory the runtime returns later splits
// those pages again and stays returned (Collapse, which remembers what it
// collapsed, does not collapse them again). The kernel refuses to collapse
// memory advised MADV_NOHUGEPAGE, as GODEBUG=disablethp=1 advises the heap.
package hugepage

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// madvCollapse is MADV_COLLAPSE from <linux/mman.h>; package syscall does
// not define it.
const madvCollapse = 25

// hugeSize is the size of a huge page on amd64 (and on arm64 with 4 KiB
// pages).
const hugeSize = 2 << 20

// Bounds on Collapse: the most huge pages one call checks for residency;
// the most it tries to collapse (each try stalls the process's page faults
// while it copies, whether it succeeds or not: about 10 ms in this
// project's virtual machine); how many scanning calls pass before a huge
// page whose collapse failed is tried again; and over how many calls the
// heap's growth is measured (a second, at flint serve's interval of 100 ms,
// if no call takes longer).
const (
	scanChunks  = 4
	maxTries    = 1
	retryAfter  = 600
	settleCalls = 10
)

// ErrUnavailable is wrapped by the errors of Enabled and Collapse that say
// huge pages cannot be had here: a kernel without them, before 6.1, or
// with them set to "never"; or a heap advised MADV_NOHUGEPAGE.
var ErrUnavailable = errors.New("hugepage: transparent huge pages unavailable")

// Enabled reports, as an error wrapping ErrUnavailable, what keeps this
// system from giving huge pages to a process that asks, or nil.
func Enabled() error {
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%w: this kernel has none", ErrUnavailable)
	case err != nil:
		return err
	case bytes.Contains(b, []byte("[never]")):
		return fmt.Errorf("%w: they are set to never", ErrUnavailable)
	}
	return nil
}

// anchor is a heap object: the mapping that holds it is part of the heap.
var anchor = new([64 << 10]byte)

// span is a range of addresses [lo, hi).
type span struct{ lo, hi uintptr }

// Stats says what one call of Collapse did.
type Stats struct {
	Tried     int   // huge pages it tried to collapse
	Collapsed int64 // bytes it collapsed into huge pages
}

// state is what Collapse remembers between calls.
var state struct {
	sync.Mutex
	mapped uint64              // memory the runtime had mapped at the last call
	chunks []uintptr           // the start of every aligned huge page of the heap then, in order
	next   uintptr             // where the next scan starts
	calls  uint64              // calls that got as far as scanning, so far
	skip   map[uintptr]uint64  // huge pages to pass over until this call: forever once collapsed
	seen   [settleCalls]uint64 // mapped at each of the last settleCalls calls, a ring
	looks  uint64              // calls so far, scanning or not: the next is seen[looks%settleCalls]
}

// Collapse collapses dense huge pages of the heap into huge pages, unless
// the heap is growing (see the package doc): it checks up to scanChunks of
// those it has not collapsed before (nor failed to, lately),
// going on from where the last call stopped, and tries up to maxTries. A
// try that fails for want of a free huge page is not an error: a later call
// tries again. Collapse fails if /proc/self/maps cannot be read or
// understood, and with an error wrapping ErrUnavailable if the kernel
// refuses to collapse at all.
//
// The heap's mappings are those the runtime names "Go: heap" where the
// kernel keeps names (Linux with CONFIG_ANON_VMA_NAME); elsewhere, the
// anonymous ones, readable and writable or reserved (---p), contiguous with
// the one that holds a known heap object: a part of the heap that the
// runtime had to place elsewhere is then not found.
func Collapse() (Stats, error) {
	state.Lock()
	defer state.Unlock()
	mapped := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	metrics.Read(mapped)
	m := mapped[0].Value.Uint64()
	grew := growing(m)
	if m != state.mapped || state.chunks == nil {
		// The runtime has mapped more memory since the last call: read
		// the heap's mappings again, and collapse nothing while it grows.
		maps, err := os.ReadFile("/proc/self/maps")
		if err != nil {
			return Stats{}, err
		}
		heap, err := heapSpans(maps, uintptr(unsafe.Pointer(anchor)))
		if err != nil {
			return Stats{}, err
		}
		state.mapped, state.chunks = m, chunksOf(heap)
		return Stats{}, nil
	}
	if grew {
		return Stats{}, nil
	}
	var st Stats
	if state.skip == nil {
		state.skip = make(map[uintptr]uint64)
	}
	state.calls++
	chunks := state.chunks
	start, _ := slices.BinarySearch(chunks, state.next)
	var vec []byte
	for k, scanned := 0, 0; k < len(chunks) && scanned < scanChunks; k++ {
		at := chunks[(start+k)%len(chunks)]
		state.next = at + hugeSize
		if state.calls < state.skip[at] {
			continue
		}
		scanned++
		if vec = residency(at, vec); !dense(vec) {
			continue
		}
		if st.Tried == maxTries {
			state.next = at
			break
		}
		st.Tried++
		switch _, _, e := syscall.Syscall(syscall.SYS_MADVISE, at, hugeSize, madvCollapse); e {
		case 0:
			state.skip[at] = math.MaxUint64
			st.Collapsed += hugeSize
		case syscall.EINVAL:
			return st, fmt.Errorf("%w: madvise(%#x, 2 MiB, MADV_COLLAPSE): %v", ErrUnavailable, at, e)
		default: // no huge page free, say, or pages the kernel would not move
			state.skip[at] = state.calls + retryAfter
		}
	}
	return st, nil
}

// growing records m, the memory mapped now, and reports whether it is more
// than a 64th above what was mapped settleCalls calls ago. There is no such
// figure in the first settleCalls calls, and it reports true. The caller
// holds state's lock.
func growing(m uint64) bool {
	at := state.looks % settleCalls
	before := state.seen[at]
	state.seen[at] = m
	state.looks++
	return m > before+before/64
}

// chunksOf returns the start of every aligned huge page within spans, in
// address order.
func chunksOf(spans []span) []uintptr {
	var out []uintptr
	for _, s := range spans {
		for at := (s.lo + hugeSize - 1) &^ (hugeSize - 1); at+hugeSize <= s.hi; at += hugeSize {
			out = append(out, at)
		}
	}
	return out
}

// residency returns, in vec's storage if it is large enough, the residency
// of each small page of the huge page at addr (bit 0 of each byte), or
// nothing if the kernel cannot tell.
func residency(addr uintptr, vec []byte) []byte {
	if n := hugeSize / os.Getpagesize(); cap(vec) < n {
		vec = make([]byte, n)
	} else {
		vec = vec[:n]
	}
	if _, _, e := syscall.Syscall(syscall.SYS_MINCORE, addr, hugeSize, uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		return vec[:0]
	}
	return vec
}

// dense reports whether at least 7/8 of the pages in vec are resident. A
// collapse makes the whole huge page resident, so this bounds the memory it
// adds to an eighth of what it collapses.
func dense(vec []byte) bool {
	n := 0
	for _, b := range vec {
		n += int(b & 1)
	}
	return len(vec) > 0 && 8*n >= 7*len(vec)
}

// Keep calls Collapse now and then every interval until ctx is done. It
// stops, returning the error, if huge pages are unavailable (see Enabled);
// any other error it passes to report, and goes on.
func Keep(ctx context.Context, interval time.Duration, report func(error)) error {
	if err := Enabled(); err != nil {
		return err
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := Collapse(); errors.Is(err, ErrUnavailable) {
			return err
		} else if err != nil {
			report(err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Resident returns how many bytes of this process's memory are in
// transparent huge pages (AnonHugePages in /proc/self/smaps_rollup),
// whatever put them there.
func Resident() (int64, error) {
	b, err := os.ReadFile("/proc/self/smaps_rollup")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "AnonHugePages:" && f[2] == "kB" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				break
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("hugepage: no AnonHugePages in /proc/self/smaps_rollup")
}

// mapping is one line of /proc/PID/maps.
type mapping struct {
	span
	perms string
	anon  bool   // no file behind it
	name  string // "" or, for an anonymous mapping, a name like "[anon: Go: heap]"
}

// Names the Go runtime (1.25 and later) gives its heap's mappings, as the
// kernel shows them.
const (
	heapName     = "[anon: Go: heap]"
	reservedName = "[anon: Go: heap reservation]"
)

// heapSpans returns the readable and writable mappings of the heap in maps
// (the text of /proc/PID/maps): those named heapName if any is, else those
// in the block of contiguous unnamed anonymous mappings holding addr.
func heapSpans(maps []byte, addr uintptr) ([]span, error) {
	ms, err := parseMaps(maps)
	if err != nil {
		return nil, err
	}
	var named []span
	for _, m := range ms {
		if m.anon && m.name == heapName && m.perms == "rw-p" {
			named = append(named, m.span)
		}
	}
	if len(named) > 0 {
		return named, nil
	}
	at := slices.IndexFunc(ms, func(m mapping) bool { return m.lo <= addr && addr < m.hi })
	if at < 0 || !heapLike(ms[at]) {
		return nil, fmt.Errorf("hugepage: no anonymous mapping holds the heap address %#x", addr)
	}
	lo, hi := at, at
	for lo > 0 && heapLike(ms[lo-1]) && ms[lo-1].hi == ms[lo].lo {
		lo--
	}
	for hi+1 < len(ms) && heapLike(ms[hi+1]) && ms[hi].hi == ms[hi+1].lo {
		hi++
	}
	var out []span
	for _, m := range ms[lo : hi+1] {
		if m.perms == "rw-p" {
			out = append(out, m.span)
		}
	}
	return out, nil
}

// heapLike reports whether m may be part of an unnamed heap.
func heapLike(m mapping) bool {
	return m.anon && (m.name == "" || m.name == reservedName) && (m.perms == "rw-p" || m.perms == "---p")
}

// parseMaps parses /proc/PID/maps: one mapping a line, as
// "lo-hi perms offset dev inode [name]", addresses in hex, in address order.
// The name is a path, a pseudo-path like [stack], or [anon: NAME].
func parseMaps(maps []byte) ([]mapping, error) {
	var ms []mapping
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			return nil, fmt.Errorf("hugepage: malformed line in maps: %q", sc.Text())
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		a, errA := strconv.ParseUint(lo, 16, 64)
		b, errB := strconv.ParseUint(hi, 16, 64)
		if !ok || errA != nil || errB != nil || a >= b {
			return nil, fmt.Errorf("hugepage: malformed range in maps: %q", sc.Text())
		}
		name := strings.Join(f[5:], " ")
		anon := f[4] == "0" && (name == "" || strings.HasPrefix(name, "[anon:"))
		ms = append(ms, mapping{span{uintptr(a), uintptr(b)}, f[1], anon, name})
	}
	return ms, sc.Err()
}
