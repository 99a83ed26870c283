package vfs

import (
	"runtime"
	"testing"
	"time"
)

// TestPrefetchTouchesEveryPage sums the first byte of every page of buffers
// whose lengths are not multiples of the page size, through chunks that
// start inside them.
func TestPrefetchTouchesEveryPage(t *testing.T) {
	var bufs [][]byte
	pages := 0
	for _, n := range []int{3*pageSize + 100, pageSize, 5000, 1, 7 * pageSize} {
		b := make([]byte, n)
		for i := 0; i < n; i += pageSize {
			b[i] = 1
			pages++
		}
		bufs = append(bufs, b)
	}
	p := &Prefetcher{bufs: bufs}
	var end int64
	for _, b := range bufs {
		end += int64(len(b))
	}
	if got := p.touch(0, end); int(got) != pages {
		t.Fatalf("touch of everything summed %d page starts, want %d", got, pages)
	}
	// In chunks of 5,000 bytes, a page may be touched twice, never missed.
	sum := 0
	for off := int64(0); off < end; off += 5000 {
		sum += int(p.touch(off, min(off+5000, end)))
	}
	if sum < pages {
		t.Fatalf("touch in chunks summed %d page starts, want at least %d", sum, pages)
	}
}

// TestPrefetchWindow: the prefetcher stays within its window ahead of the
// reader, goes on when the reader advances, and stops on Stop.
func TestPrefetchWindow(t *testing.T) {
	const chunk, window = 4 * pageSize, 16 * pageSize
	bufs := [][]byte{make([]byte, 40*pageSize), make([]byte, 60*pageSize)}
	p := prefetch(chunk, window, bufs)
	defer p.Stop()
	waitUntil(t, func() bool { return p.next.Load() >= window })
	time.Sleep(20 * time.Millisecond)
	// Each goroutine may have claimed one chunk past the window and be
	// waiting to touch it.
	if got, most := p.next.Load(), int64(window+chunk*runtime.GOMAXPROCS(0)); got > most {
		t.Fatalf("with the reader at 0, the prefetcher claimed up to %d, want at most %d", got, most)
	}
	p.Advance(p.end)
	waitUntil(t, func() bool { return p.next.Load() >= p.end })
}

// TestPrefetchStop: Stop returns while the prefetcher waits for the reader.
func TestPrefetchStop(t *testing.T) {
	p := prefetch(pageSize, pageSize, [][]byte{make([]byte, 100*pageSize)})
	time.Sleep(10 * time.Millisecond)
	done := make(chan struct{})
	go func() { p.Stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not return")
	}
}

// waitUntil polls cond for up to 10 seconds.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}
