package snap

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/flintkv/flint/internal/frame"
	"github.com/flintkv/flint/internal/vfs"
)

// Verify checks the snapshot file name as Load does, every frame and every
// pair, without loading the pairs anywhere, and returns its meta. It
// returns an *Error if the file is damaged or truncated (the damage at the
// lowest offset), or another error if the file cannot be read.
//
// Unlike Load, it does not map the file, which would keep the mapping (and
// the file's disk space, were it removed) for the life of the process: it
// reads one frame at a time on the calling goroutine (frame.Reader). It
// holds in memory only that frame, the last key and the sections.
func Verify(fs vfs.FS, name string) (Meta, error) {
	m, err := verify(fs, name)
	var se *Error
	if err != nil && !errors.As(err, &se) {
		err = fmt.Errorf("snap: %w", err)
	}
	return m, err
}

// verify is Verify, with errors not yet prefixed with the package's name.
func verify(fs vfs.FS, name string) (Meta, error) {
	return verifyPairs(fs, name, nil)
}

// verifyPairs is verify, which also calls put, if not nil, for each pair
// in order; put's first error stops it, and is returned.
func verifyPairs(fs vfs.FS, name string, put func(key, val []byte) error) (Meta, error) {
	f, err := fs.Open(name)
	if err != nil {
		return Meta{}, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return Meta{}, err
	}
	return readPairs(&loader{name: name, size: size}, frame.NewReader(f, size), put)
}

// ReadFrom reads a snapshot that WriteTo wrote from r, one frame at a
// time, checking it as Verify does, and calls put for each pair, in key
// order, on the calling goroutine; key and val are valid only during the
// call. It reads r to its end, and returns the snapshot's meta. put's
// first error stops it, and is returned; damage, or r ending before the
// end record, is an *Error of the file "stream"; an error reading r is
// wrapped.
//
// Its memory is the frame being read (about 256 KiB, unless one pair is
// larger), the last key and the sections, never the snapshot.
func ReadFrom(r io.Reader, put func(key, val []byte) error) (Meta, error) {
	return readPairs(&loader{name: "stream", size: -1}, frame.NewStreamReader(r), put)
}

// readPairs is verifyPairs of the frames src reads, which l checks.
func readPairs(l *loader, src source, put func(key, val []byte) error) (Meta, error) {
	s := &sequential{loader: l, put: put}
	end, lerr := s.dispatch(src, s.pairs)
	if lerr == nil {
		lerr = s.end(end, s.count, s.bytes, src)
	}
	switch {
	case s.putErr != nil:
		return s.meta, s.putErr
	case s.ioErr != nil:
		return s.meta, fmt.Errorf("reading %s: %w", l.name, s.ioErr)
	case lerr != nil:
		return s.meta, lerr
	}
	return s.meta, nil
}

// sequential checks the pairs frames of a snapshot one after another, as
// its loader reads them.
type sequential struct {
	*loader
	last         []byte // the last key so far, a copy: frames' payloads do not last
	any          bool   // a key was read: last is one
	count, bytes uint64
	put          func(key, val []byte) error // or nil
	putErr       error                       // put's first error
}

// pairs checks the pairs frame fr, and that its keys follow the last one.
func (s *sequential) pairs(fr frame.Frame) *Error {
	r := &run{off: fr.Offset}
	err := decodePairs(r, fr.Payload, func(key, val []byte) {
		if s.put != nil && s.putErr == nil {
			s.putErr = s.put(key, val)
		}
	})
	if err != nil {
		return s.errorAt(fr.Offset, err.Error())
	}
	if s.putErr != nil {
		return s.errorAt(fr.Offset, "stopped reading")
	}
	if r.first == nil {
		return nil
	}
	if s.any && bytes.Compare(s.last, r.first) >= 0 {
		return s.errorAt(fr.Offset, orderError(r.first, s.last).Error())
	}
	s.last, s.any = append(s.last[:0], r.last...), true
	s.count, s.bytes = s.count+r.count, s.bytes+r.bytes
	return nil
}
