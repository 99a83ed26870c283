package snap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/flintkv/flint/internal/frame"
	"github.com/flintkv/flint/internal/vfs"
)

// Load reads the snapshot file name and calls put for every pair in it. key
// is only valid during the call; val stays valid and unchanged for the life
// of the process, so put may keep it without a copy (it must not modify it).
// Load returns the snapshot's meta, or an *Error if the file is damaged or
// truncated, in which case put may have seen some of its pairs.
//
// The file is mapped (vfs.Map): values are served from the page cache, and
// loading copies none. One goroutine checks frames, and so reads the file
// from disk, while the caller's goroutine decodes them and runs put.
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
	frames, stop := make(chan rawFrame, 64), make(chan struct{})
	defer close(stop)
	go scanFrames(b, frames, stop)
	l := loader{name: name, put: put}
	for i := 0; ; i++ {
		fr := <-frames
		var fe *frame.Error
		switch {
		case fr.err == io.EOF:
			return l.meta, &Error{File: name, Offset: fr.off, Reason: "the file ends before its end record: it is truncated"}
		case errors.As(fr.err, &fe) && fe.Torn:
			return l.meta, &Error{File: name, Offset: fe.Offset, Reason: fe.Reason + ": the file is truncated"}
		case errors.As(fr.err, &fe):
			return l.meta, &Error{File: name, Offset: fe.Offset, Reason: fe.Reason}
		}
		done, err := l.frame(i, fr.typ, fr.payload)
		if err != nil {
			return l.meta, &Error{File: name, Offset: fr.off, Reason: err.Error()}
		}
		if done {
			// Zeros end a frame file cleanly (see package frame), but no
			// snapshot is written with any.
			if fr := <-frames; fr.err != io.EOF || fr.off != int64(len(b)) {
				return l.meta, &Error{File: name, Offset: fr.off, Reason: "data after the end record"}
			}
			return l.meta, nil
		}
	}
}

// rawFrame is one checked frame, or the error that ended scanning.
type rawFrame struct {
	off     int64
	typ     byte
	payload []byte
	err     error
}

// scanFrames sends the frames of b until an error (io.EOF at the end) or
// stop.
func scanFrames(b []byte, frames chan<- rawFrame, stop <-chan struct{}) {
	s := frame.NewScanner(b)
	for {
		off := s.Offset()
		typ, p, err := s.Next()
		select {
		case frames <- rawFrame{off: off, typ: typ, payload: p, err: err}:
		case <-stop:
			return
		}
		if err != nil {
			return
		}
	}
}

// loader decodes the frames of one snapshot.
type loader struct {
	name         string
	put          func(key, val []byte)
	meta         Meta
	count, bytes uint64
}

// frame decodes the i-th frame and reports whether it was the end frame.
func (l *loader) frame(i int, typ byte, p []byte) (bool, error) {
	var err error
	switch {
	case i == 0 && typ != typeHeader:
		return false, errors.New("the file does not start with a snapshot header")
	case i == 0:
		l.meta, err = decodeHeader(p)
		return false, err
	case typ == typePairs:
		return false, l.pairs(p)
	case typ == typeEnd:
		return true, l.end(p)
	}
	return false, fmt.Errorf("unknown frame type %d (written by a newer version?)", typ)
}

func (l *loader) pairs(p []byte) error {
	for len(p) > 0 {
		key, rest, ok := field(p)
		if !ok {
			return errors.New("bad key in pairs record")
		}
		val, rest, ok := field(rest)
		if !ok {
			return errors.New("bad value in pairs record")
		}
		l.put(key, val)
		l.count++
		l.bytes += uint64(len(key) + len(val))
		p = rest
	}
	return nil
}

// field decodes a length-prefixed byte string.
func field(p []byte) (b, rest []byte, ok bool) {
	n, w := binary.Uvarint(p)
	if w <= 0 || n > uint64(len(p)-w) {
		return nil, p, false
	}
	return p[w : w+int(n)], p[w+int(n):], true
}

func (l *loader) end(p []byte) error {
	count, w := binary.Uvarint(p)
	if w <= 0 {
		return errors.New("bad end record")
	}
	bytes, w2 := binary.Uvarint(p[w:])
	if w2 <= 0 || w+w2 != len(p) {
		return errors.New("bad end record")
	}
	if count != l.count || bytes != l.bytes {
		return fmt.Errorf("the end record counts %d pairs of %d bytes, the file holds %d of %d", count, bytes, l.count, l.bytes)
	}
	return nil
}
