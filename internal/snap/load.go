package snap

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
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
// Load returns the snapshot's meta, or an *Error if the file is damaged or
// truncated (the damage at the lowest offset), in which case put may have
// seen some of its pairs, from before the damage and perhaps a little after.
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
	frames := frame.NewAhead(b, pf.Advance)
	defer frames.Close()
	l := &loader{name: name, put: put, size: int64(len(b))}
	if err := l.load(frames); err != nil {
		return l.meta, err
	}
	return l.meta, nil
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

// loader decodes the frames of one snapshot: the header and end frames on
// the goroutine that runs load, pairs frames on decoders.
type loader struct {
	name string
	put  func(key, val []byte)
	size int64 // of the file
	meta Meta

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

// load checks the header, hands pairs frames to decoders, and, once they
// are done, checks the order of their runs and the end frame. It returns
// the damage found at the lowest offset.
func (l *loader) load(frames *frame.Ahead) *Error {
	work := make(chan frame.Frame, 16)
	for range runtime.GOMAXPROCS(0) {
		l.decoders.Add(1)
		go l.decode(work)
	}
	end, err := l.dispatch(frames, work)
	close(work)
	l.decoders.Wait()
	err = first(err, l.failed)
	limit := int64(math.MaxInt64)
	if err != nil {
		limit = err.Offset
	}
	err = first(err, l.checkRuns(limit))
	if err != nil {
		return err
	}
	return l.end(end, frames)
}

// first returns whichever of a and b, if any, is at the lower offset.
func first(a, b *Error) *Error {
	if a == nil || (b != nil && b.Offset < a.Offset) {
		return b
	}
	return a
}

// dispatch reads frames up to the end frame, which it returns, sending pairs
// frames to work. It stops at the first damage, which it returns, or once a
// decoder has found some.
func (l *loader) dispatch(frames *frame.Ahead, work chan<- frame.Frame) (frame.Frame, *Error) {
	for i := 0; !l.stopped.Load(); i++ {
		fr := frames.Next()
		if err := l.frameError(fr); err != nil {
			return fr, err
		}
		switch {
		case i == 0 && fr.Type != typeHeader:
			return fr, l.errorAt(fr.Offset, "the file does not start with a snapshot header")
		case i == 0:
			m, err := decodeHeader(fr.Payload)
			if err != nil {
				return fr, l.errorAt(fr.Offset, err.Error())
			}
			l.meta = m
		case fr.Type == typePairs:
			work <- fr
		case fr.Type == typeEnd:
			return fr, nil
		default:
			return fr, l.errorAt(fr.Offset, fmt.Sprintf("unknown frame type %d (written by a newer version?)", fr.Type))
		}
	}
	return frame.Frame{}, nil // a decoder failed: load returns its error
}

// frameError turns a scanning error into an *Error.
func (l *loader) frameError(fr frame.Frame) *Error {
	var fe *frame.Error
	switch {
	case fr.Err == nil:
		return nil
	case fr.Err == io.EOF:
		return l.errorAt(fr.Offset, "the file ends before its end record: it is truncated")
	case errors.As(fr.Err, &fe) && fe.Torn:
		return l.errorAt(fe.Offset, fe.Reason+": the file is truncated")
	case errors.As(fr.Err, &fe):
		return l.errorAt(fe.Offset, fe.Reason)
	}
	return l.errorAt(fr.Offset, fr.Err.Error())
}

func (l *loader) errorAt(off int64, reason string) *Error {
	return &Error{File: l.name, Offset: off, Reason: reason}
}

// decode decodes the pairs frames it receives, calling put for each pair,
// until work is closed.
func (l *loader) decode(work <-chan frame.Frame) {
	defer l.decoders.Done()
	for fr := range work {
		r := &run{off: fr.Offset}
		l.mu.Lock()
		l.runs = append(l.runs, r)
		l.mu.Unlock()
		if err := l.pairs(r, fr.Payload); err != nil {
			l.fail(l.errorAt(fr.Offset, err.Error()))
		}
	}
}

// fail records err unless a decoder found damage earlier in the file, and
// stops dispatch.
func (l *loader) fail(err *Error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failed = first(l.failed, err)
	l.stopped.Store(true)
}

// pairs decodes one pairs frame into r, calling put for each pair.
func (l *loader) pairs(r *run, p []byte) error {
	for len(p) > 0 {
		key, rest, ok := field(p)
		if !ok {
			return errors.New("bad key in pairs record")
		}
		val, rest, ok := field(rest)
		if !ok {
			return errors.New("bad value in pairs record")
		}
		if r.last != nil && bytes.Compare(r.last, key) >= 0 {
			return fmt.Errorf("key %.40q follows key %.40q: keys are not in ascending order", key, r.last)
		}
		if r.first == nil {
			r.first = key
		}
		r.last = key
		l.put(key, val)
		r.count++
		r.bytes += uint64(len(key) + len(val))
		p = rest
	}
	return nil
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
func (l *loader) checkRuns(limit int64) *Error {
	slices.SortFunc(l.runs, func(a, b *run) int { return cmp.Compare(a.off, b.off) })
	var last []byte
	for _, r := range l.runs {
		if r.off >= limit {
			break
		}
		if r.first == nil {
			continue
		}
		if last != nil && bytes.Compare(last, r.first) >= 0 {
			return l.errorAt(r.off, fmt.Sprintf("key %.40q follows key %.40q: keys are not in ascending order", r.first, last))
		}
		last = r.last
	}
	return nil
}

// end checks the end frame fr against the pairs the decoders found, and
// that the file ends with it.
func (l *loader) end(fr frame.Frame, frames *frame.Ahead) *Error {
	var count, total uint64
	for _, r := range l.runs {
		count, total = count+r.count, total+r.bytes
	}
	p := fr.Payload
	n, w := binary.Uvarint(p)
	if w <= 0 {
		return l.errorAt(fr.Offset, "bad end record")
	}
	size, w2 := binary.Uvarint(p[w:])
	if w2 <= 0 || w+w2 != len(p) {
		return l.errorAt(fr.Offset, "bad end record")
	}
	if n != count || size != total {
		return l.errorAt(fr.Offset, fmt.Sprintf("the end record counts %d pairs of %d bytes, the file holds %d of %d", n, size, count, total))
	}
	// Zeros end a frame file cleanly (see package frame), but no snapshot
	// is written with any.
	if after := frames.Next(); after.Err != io.EOF || after.Offset != l.size {
		return l.errorAt(after.Offset, "data after the end record")
	}
	return nil
}
