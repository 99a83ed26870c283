// Package hugepage asks Linux to back the Go heap with transparent huge
// pages.
//
// A store of a million keys reads and writes its hash maps, cells and index
// at random places across hundreds of megabytes. With 4 KiB pages nearly
// every such access also misses the TLB, and in a virtual machine each miss
// walks two page tables, the guest's and the host's. With 2 MiB pages the
// same heap needs 512 times fewer TLB entries.
//
// The Go runtime leaves the choice to the system. On the common setting
// "madvise" (/sys/kernel/mm/transparent_hugepage/enabled), only memory
// advised with madvise(MADV_HUGEPAGE) gets huge pages, and the runtime
// advises none of its heap. Advise finds the heap's mappings in
// /proc/self/maps and advises them. Memory the runtime maps later, as the
// heap grows, comes as new mappings that do not inherit the advice, so a
// long-running process calls Advise again from time to time (Keep).
//
// What it costs: memory, since a huge page is resident as a whole once any
// of it is touched, and the kernel's khugepaged may gather a sparsely used
// region back into huge pages after the runtime has returned part of it; and,
// when physical memory is fragmented, page faults in advised memory may wait
// for the kernel to compact it (/sys/kernel/mm/transparent_hugepage/defrag).
package hugepage

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// From <linux/mman.h>; package syscall does not define them.
const (
	madvHugepage = 14
	madvCollapse = 25 // Linux 6.1 and later
)

// hugeSize is the size of a huge page on amd64 (and on arm64 with 4 KiB
// pages).
const hugeSize = 2 << 20

// anchor is a heap object: the mapping that holds it is part of the heap.
var anchor = new([64 << 10]byte)

// span is a range of addresses [lo, hi).
type span struct{ lo, hi uintptr }

// Stats says what one call of Advise did.
type Stats struct {
	Advised   int64 // bytes in the heap's mappings, all advised
	Collapsed int64 // bytes collapsed into huge pages by this call
}

// maxCollapse is the most bytes one Advise collapses. A collapse copies its
// 2 MiB while holding the process's memory map, which stalls every thread
// that faults a page in meanwhile: a few at a time keep those stalls short.
const maxCollapse = 4 * hugeSize

// state is what Advise remembers between calls.
var state struct {
	sync.Mutex
	collapsed map[uintptr]bool // the start of every huge page collapsed
	advised   int64            // Stats.Advised of the last call
}

// Advise advises every mapping of the heap to use huge pages, so that memory
// the runtime touches there for the first time comes in huge pages. Memory
// it touched before the advice is in small pages, which the kernel's
// khugepaged gathers into huge ones only slowly (16 MiB every 10 s by
// default). So, once the heap has stopped growing (its mappings cover what
// they covered at the last call), Advise also collapses aligned 2 MiB of it
// whose small pages are nearly all resident (see dense) into huge pages, up
// to maxCollapse a call (MADV_COLLAPSE; a kernel before 6.1 cannot, and the
// advice alone remains). While the heap grows, collapses would stall the
// page faults that its growth takes.
//
// The heap's mappings are the anonymous ones, readable and writable or
// reserved (---p), contiguous with the one that holds a known heap object; a
// part of the heap that the runtime had to place elsewhere is not found.
// Advise fails if /proc/self/maps cannot be read or the kernel refuses the
// advice (EINVAL: a kernel built without transparent huge pages). Where they
// are set to "never", the advice is taken and has no effect.
func Advise() (Stats, error) {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return Stats{}, err
	}
	heap, err := heapSpans(maps, uintptr(unsafe.Pointer(anchor)))
	if err != nil {
		return Stats{}, err
	}
	var st Stats
	for _, s := range heap {
		if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, s.lo, s.hi-s.lo, madvHugepage); e != 0 {
			return st, fmt.Errorf("madvise(%#x, %d, MADV_HUGEPAGE): %w", s.lo, s.hi-s.lo, e)
		}
		st.Advised += int64(s.hi - s.lo)
	}
	state.Lock()
	defer state.Unlock()
	if st.Advised == state.advised {
		for _, s := range heap {
			st.Collapsed += collapse(s, maxCollapse-st.Collapsed)
		}
	}
	state.advised = st.Advised
	return st, nil
}

// collapse collapses dense huge pages of s not yet collapsed, up to limit
// bytes, and returns how many bytes it collapsed. A collapse that fails (no
// free huge page, say) is not an error: the memory stays in small pages, and
// a later call tries again. The caller holds state's lock.
func collapse(s span, limit int64) int64 {
	if state.collapsed == nil {
		state.collapsed = make(map[uintptr]bool)
	}
	var n int64
	var vec []byte
	for at := (s.lo + hugeSize - 1) &^ (hugeSize - 1); at+hugeSize <= s.hi && n < limit; at += hugeSize {
		if state.collapsed[at] {
			continue
		}
		if vec = residency(at, vec); !dense(vec) {
			continue
		}
		if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, at, hugeSize, madvCollapse); e == 0 {
			state.collapsed[at] = true
			n += hugeSize
		}
	}
	return n
}

// residency returns, in vec's storage, the residency of each small page of
// the huge page at addr (bit 0 of each byte), or nothing if the kernel
// cannot tell.
func residency(addr uintptr, vec []byte) []byte {
	vec = append(vec[:0], make([]byte, hugeSize/os.Getpagesize())...)
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

// Keep calls Advise now and then every interval until ctx is done. It stops
// and returns the error of the first Advise that fails.
func Keep(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := Advise(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// mapping is one line of /proc/PID/maps.
type mapping struct {
	span
	perms string
	anon  bool // no file and no name such as [stack]
}

// heapSpans returns the readable and writable mappings in maps (the text of
// /proc/PID/maps) that belong to the block of contiguous anonymous mappings
// holding addr.
func heapSpans(maps []byte, addr uintptr) ([]span, error) {
	ms, err := parseMaps(maps)
	if err != nil {
		return nil, err
	}
	at := -1
	for i, m := range ms {
		if m.lo <= addr && addr < m.hi {
			at = i
		}
	}
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

func heapLike(m mapping) bool { return m.anon && (m.perms == "rw-p" || m.perms == "---p") }

// parseMaps parses /proc/PID/maps: one mapping a line, as
// "lo-hi perms offset dev inode [path]", addresses in hex, in address order.
func parseMaps(maps []byte) ([]mapping, error) {
	var ms []mapping
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 5 {
			return nil, fmt.Errorf("hugepage: malformed line in maps: %q", sc.Text())
		}
		lo, hi, ok := bytes.Cut(f[0], []byte("-"))
		a, errA := strconv.ParseUint(string(lo), 16, 64)
		b, errB := strconv.ParseUint(string(hi), 16, 64)
		if !ok || errA != nil || errB != nil || a >= b {
			return nil, fmt.Errorf("hugepage: malformed range in maps: %q", sc.Text())
		}
		ms = append(ms, mapping{span{uintptr(a), uintptr(b)}, string(f[1]), len(f) == 5 && string(f[4]) == "0"})
	}
	return ms, sc.Err()
}
