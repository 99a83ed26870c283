package snap

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/flintkv/flint/internal/frame"
	"github.com/flintkv/flint/internal/vfs"
)

// Load reads the snapshot file name and calls put for every pair in it. key
// is only valid during the call; val stays valid and unchanged for the life
// of the process, so put may keep it without a copy (it must not modify it).
// Load returns the snapshot's meta (its sections' data copied, the
// caller's), or an *Error if the file is damaged or truncated (the damage
// at the lowest offset), in which case put may have seen some of its
// pairs, from before the damage and perhaps a little after.
//
// put is called from several goroutines at once, in no particular order:
// the file holds each key once (see the format), so the order cannot change
// the outcome.
//
// The file is mapped (vfs.Map): values are served from the page cache, and
// loading copies none. A vfs.Prefetcher reads the file from disk ahead of a
// goroutine that checks frames (frame.Ahead); one goroutine per processor
// decodes pairs frames and runs put.
func Load(fs vfs.FS, name string, put func(key, val []byte)) (Meta, error) {
	f, err := fs.Open(name)
	if err != nil {
		return Meta{}, fmt.Errorf("snap: %w", err)
	}
	b, err := vfs.Map(f)
	f.Close()
	if err != nil {
		return Meta{}, fmt.Errorf("snap: %s: %w", name, err)
	}
	pf := vfs.Prefetch(b)
	defer pf.Stop()
	return load(name, b, pf.Advance, put)
}

// LoadBytes is Load of a snapshot held in b, as WriteTo wrote it: val
// stays valid as long as b does, and b must not be modified.
func LoadBytes(b []byte, put func(key, val []byte)) (Meta, error) {
	return load("snapshot", b, func(int64) {}, put)
}

// load loads the snapshot b, named name in errors, calling progress as
// frame.NewAhead does.
func load(name string, b []byte, progress func(off int64), put func(key, val []byte)) (Meta, error) {
	frames := frame.NewAhead(b, progress)
	defer frames.Close()
	p := &parallel{loader: &loader{name: name, size: int64(len(b))}, put: put}
	if err := p.load(frames); err != nil {
		return p.meta, err
	}
	return p.meta, nil
}

// CountHint returns the pair count that the end record of snapshot name
// declares, reading only the file's last bytes, so that a caller can size
// its tables before Load. ok is false if the file does not end with a valid
// end record; Load checks the count against the pairs in any case.
func CountHint(fs vfs.FS, name string) (count uint64, ok bool) {
	f, err := fs.Open(name)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return 0, false
	}
	// An end frame holds two varints: 16, 24 or 32 bytes in all.
	tail := make([]byte, min(size, 32))
	if _, err := f.ReadAt(tail, size-int64(len(tail))); err != nil {
		return 0, false
	}
	for n := 16; n <= len(tail); n += 8 {
		s := frame.NewScanner(tail[len(tail)-n:])
		typ, p, err := s.Next()
		if err == nil && typ == typeEnd && s.Offset() == int64(n) {
			count, w := binary.Uvarint(p)
			return count, w > 0 && count <= uint64(size)
		}
	}
	return 0, false
}

// parallel checks a snapshot's frames as Load does: its loader the header,
// sections and end frame, on the goroutine that runs load, and decoders
// the pairs frames, calling put.
type parallel struct {
	*loader
	put func(key, val []byte)

	decoders sync.WaitGroup
	mu       sync.Mutex
	runs     []*run      // one per pairs frame, in no order until checkRuns; guarded by mu
	failed   *Error      // the decoders' error at the lowest offset; guarded by mu
	stopped  atomic.Bool // a decoder failed
}

// run is what a decoder found in one pairs frame: a run of pairs in
// ascending key order.
type run struct {
	off          int64
	first, last  []byte // keys; nil if the frame holds no pair
	count, bytes uint64
}

// load checks the frames, handing pairs frames to decoders, and, once they
// are done, checks the order of their runs and the end frame. It returns
// the damage found at the lowest offset.
func (p *parallel) load(frames source) *Error {
	work := make(chan frame.Frame, 16)
	for range runtime.GOMAXPROCS(0) {
		p.decoders.Add(1)
		go p.decode(work)
	}
	end, err := p.dispatch(frames, func(fr frame.Frame) *Error {
		work <- fr
		return p.stop()
	})
	close(work)
	p.decoders.Wait()
	err = first(err, p.failed)
	limit := int64(math.MaxInt64)
	if err != nil {
		limit = err.Offset
	}
	err = first(err, p.checkRuns(limit))
	if err != nil {
		return err
	}
	var count, total uint64
	for _, r := range p.runs {
		count, total = count+r.count, total+r.bytes
	}
	return p.end(end, count, total, frames)
}

// stop returns the decoders' error once one has failed, which stops
// dispatch.
func (p *parallel) stop() *Error {
	if !p.stopped.Load() {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed
}

// decode decodes the pairs frames it receives, calling put for each pair,
// until work is closed.
func (p *parallel) decode(work <-chan frame.Frame) {
	defer p.decoders.Done()
	for fr := range work {
		r := &run{off: fr.Offset}
		p.mu.Lock()
		p.runs = append(p.runs, r)
		p.mu.Unlock()
		if err := decodePairs(r, fr.Payload, p.put); err != nil {
			p.fail(p.errorAt(fr.Offset, err.Error()))
		}
	}
}

// fail records err unless a decoder found damage earlier in the file, and
// stops dispatch.
func (p *parallel) fail(err *Error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failed = first(p.failed, err)
	p.stopped.Store(true)
}

// decodePairs decodes the pairs frame payload b into r, calling put for
// each pair.
func decodePairs(r *run, b []byte, put func(key, val []byte)) error {
	for len(b) > 0 {
		key, rest, ok := field(b)
		if !ok {
			return errors.New("bad key in pairs record")
		}
		val, rest, ok := field(rest)
		if !ok {
			return errors.New("bad value in pairs record")
		}
		if r.last != nil && bytes.Compare(r.last, key) >= 0 {
			return orderError(key, r.last)
		}
		if r.first == nil {
			r.first = key
		}
		r.last = key
		put(key, val)
		r.count++
		r.bytes += uint64(len(key) + len(val))
		b = rest
	}
	return nil
}

// orderError is the damage of key after last.
func orderError(key, last []byte) error {
	return fmt.Errorf("key %.40q follows key %.40q: keys are not in ascending order", key, last)
}

// field decodes a length-prefixed byte string. A decoded empty string is
// not nil, so that nil can mean "no key yet".
func field(p []byte) (b, rest []byte, ok bool) {
	n, w := binary.Uvarint(p)
	if w <= 0 || n > uint64(len(p)-w) {
		return nil, p, false
	}
	return p[w : w+int(n) : w+int(n)], p[w+int(n):], true
}

// checkRuns checks that each pairs frame's keys follow the previous
// frame's, so that the file holds each key once, in the frames before
// limit.
func (p *parallel) checkRuns(limit int64) *Error {
	slices.SortFunc(p.runs, func(a, b *run) int { return cmp.Compare(a.off, b.off) })
	var last []byte
	for _, r := range p.runs {
		if r.off >= limit {
			break
		}
		if r.first == nil {
			continue
		}
		if last != nil && bytes.Compare(last, r.first) >= 0 {
			return p.errorAt(r.off, orderError(r.first, last).Error())
		}
		last = r.last
	}
	return nil
}
