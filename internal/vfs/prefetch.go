package vfs

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Prefetch tuning. Chunks are handed out in order, so the disk still sees
// reads in file order; the window bounds the memory the prefetch may fill
// ahead of the reader, so that a file larger than memory does not evict
// its own pages before they are read.
const (
	prefetchChunk  = 4 << 20
	prefetchWindow = 256 << 20
	pageSize       = 4096
)

// Prefetcher touches the pages of mapped files (see Map) ahead of a reader
// that reads them in order, on every processor at once.
//
// Why: the first touch of a mapped page that is not yet in memory stalls
// the thread that makes it, for the disk read and, in a virtual machine,
// for the hypervisor to back the page. A single reader pays those stalls
// one page after another; several threads touching pages ahead of it pay
// them side by side and keep more reads in flight, and the reader then
// finds the pages in memory. On the 2-core guest Flint is measured on,
// checksumming a cold 4 GiB file took 4.9-7.4 s alone and 3.9-4.8 s with
// two threads touching ahead (docs/PERFORMANCE.md).
//
// Touching reads one byte per page and changes nothing: a Prefetcher
// affects only speed. But while it runs, the files it touches must not be
// truncated: touching a mapped page past the end of its file is a fatal
// fault (SIGBUS).
type Prefetcher struct {
	bufs          [][]byte
	chunk, window int64        // prefetchChunk and prefetchWindow, but in tests
	end           int64        // total length of bufs
	read          atomic.Int64 // how far the reader has got, over bufs end to end
	next          atomic.Int64 // offset of the next chunk to touch
	stop          chan struct{}
	stopOnce      sync.Once
	wg            sync.WaitGroup
}

// Prefetch starts touching bufs, taken as one sequence, from their start:
// one goroutine per processor, at most prefetchWindow bytes ahead of the
// offset last passed to Advance. Stop must be called when reading ends.
func Prefetch(bufs ...[]byte) *Prefetcher {
	return prefetch(prefetchChunk, prefetchWindow, bufs)
}

func prefetch(chunk, window int64, bufs [][]byte) *Prefetcher {
	p := &Prefetcher{bufs: bufs, chunk: chunk, window: window, stop: make(chan struct{})}
	for _, b := range bufs {
		p.end += int64(len(b))
	}
	for range runtime.GOMAXPROCS(0) {
		p.wg.Add(1)
		go p.touchChunks()
	}
	return p
}

// Advance tells the prefetcher that the reader has read up to off, counted
// over all the buffers end to end.
func (p *Prefetcher) Advance(off int64) { p.read.Store(off) }

// Stop ends the prefetch and waits for its goroutines. It may be called
// more than once.
func (p *Prefetcher) Stop() {
	p.stopOnce.Do(func() { close(p.stop) })
	p.wg.Wait()
}

// touchChunks touches chunks, taking the next one in order each time, until
// the end or Stop.
func (p *Prefetcher) touchChunks() {
	defer p.wg.Done()
	var sink byte
	for {
		off := p.next.Add(p.chunk) - p.chunk
		if off >= p.end || !p.waitFor(off) {
			touchSink.Add(uint64(sink))
			return
		}
		sink += p.touch(off, min(off+p.chunk, p.end))
	}
}

// waitFor waits until off is within the window ahead of the reader. It
// reports false if Stop was called.
func (p *Prefetcher) waitFor(off int64) bool {
	for off >= p.read.Load()+p.window {
		select {
		case <-p.stop:
			return false
		default:
			time.Sleep(time.Millisecond)
		}
	}
	select {
	case <-p.stop:
		return false
	default:
		return true
	}
}

// touch reads the first byte of every page in [from, to) (pages counted from
// the start of each buffer, which is where a mapping's pages start) and
// returns their sum, which the caller keeps so that the reads cannot be
// optimized away.
func (p *Prefetcher) touch(from, to int64) byte {
	var sum byte
	base := int64(0)
	for _, b := range p.bufs {
		lo, hi := max(from-base, 0), min(to-base, int64(len(b)))
		for i := lo &^ (pageSize - 1); i < hi; i += pageSize {
			sum += b[i]
		}
		base += int64(len(b))
	}
	return sum
}

// touchSink keeps the bytes touched, so that the compiler keeps the reads.
var touchSink atomic.Uint64
