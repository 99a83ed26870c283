package snap

import (
	"errors"
	"fmt"
	"io"

	"github.com/flintkv/flint/internal/frame"
)

// source is where a loader reads frames: a frame.Ahead over a mapped file
// (Load), or a frame.Reader (Verify).
type source interface{ Next() frame.Frame }

// loader checks the frames of one snapshot in file order: the header, the
// sections, that pairs frames come after them, and the end frame. The pairs
// frames' contents are Load's or Verify's to check.
type loader struct {
	name     string
	size     int64 // of the file; -1 for a stream, whose size is not known
	meta     Meta
	sections int    // that the header counts
	need     uint64 // bytes of the last section's data still to come
	inPairs  bool   // a pairs frame or the end frame has been read: sections are over
	ioErr    error  // the error reading the file, if that is what stopped the loader
}

// dispatch reads frames up to the end frame, which it returns, checking
// the header and the sections and handing each pairs frame to pairs. It
// stops at the first damage, or the first error from pairs, and returns it.
func (l *loader) dispatch(src source, pairs func(frame.Frame) *Error) (frame.Frame, *Error) {
	fr := src.Next()
	if err := l.header(fr); err != nil {
		return fr, err
	}
	for {
		fr = src.Next()
		if err := l.next(fr, pairs); err != nil || fr.Type == typeEnd {
			return fr, err
		}
	}
}

// header checks the first frame, fr, and decodes the header it holds.
func (l *loader) header(fr frame.Frame) *Error {
	if err := l.frameError(fr); err != nil {
		return err
	}
	if fr.Type != typeHeader {
		return l.errorAt(fr.Offset, "the file does not start with a snapshot header")
	}
	m, n, err := decodeHeader(fr.Payload)
	if err != nil {
		return l.errorAt(fr.Offset, err.Error())
	}
	l.meta, l.sections = m, n
	return nil
}

// next checks fr, a frame after the header.
func (l *loader) next(fr frame.Frame, pairs func(frame.Frame) *Error) *Error {
	if err := l.frameError(fr); err != nil {
		return err
	}
	switch fr.Type {
	case typeSection:
		return l.section(fr)
	case typeSectionData:
		return l.sectionData(fr)
	case typePairs:
		if err := l.sectionsEnd(fr.Offset); err != nil {
			return err
		}
		return pairs(fr)
	case typeEnd:
		return l.sectionsEnd(fr.Offset)
	}
	return l.errorAt(fr.Offset, fmt.Sprintf("unknown frame type %d (written by a newer version?)", fr.Type))
}

// section starts the section whose section frame is fr, copying its data.
func (l *loader) section(fr frame.Frame) *Error {
	if err := l.sectionEnd(fr.Offset); err != nil {
		return err
	}
	name, size, data, err := decodeSection(fr.Payload)
	var reason string
	switch {
	case l.inPairs:
		reason = "a section after the pairs"
	case len(l.meta.Sections) == l.sections:
		reason = fmt.Sprintf("more sections than the %d the header counts", l.sections)
	case err != nil:
		reason = err.Error()
	case sectionIndex(l.meta.Sections, name) >= 0:
		reason = fmt.Sprintf("two sections named %q", name)
	case uint64(len(data)) > size:
		reason = fmt.Sprintf("section %q holds more than the %d bytes it counts", name, size)
	default:
		// Room for all the data, but not more than the file holds: a
		// damaged length must not allocate wildly, and a file cut short
		// fails at the cut, as truncated. A stream's grows as its
		// frames arrive.
		room := uint64(len(data))
		if l.size >= 0 {
			room = min(size, uint64(l.size-fr.Offset))
		}
		l.meta.Sections = append(l.meta.Sections, Section{Name: name, Data: append(make([]byte, 0, room), data...)})
		l.need = size - uint64(len(data))
		return nil
	}
	return l.errorAt(fr.Offset, reason)
}

// sectionData appends the section data frame fr to the last section.
func (l *loader) sectionData(fr frame.Frame) *Error {
	if l.need == 0 {
		return l.errorAt(fr.Offset, "section data that no section lacks")
	}
	s := &l.meta.Sections[len(l.meta.Sections)-1]
	if uint64(len(fr.Payload)) > l.need {
		return l.errorAt(fr.Offset, fmt.Sprintf("section %q holds more than the %d bytes it counts", s.Name, uint64(len(s.Data))+l.need))
	}
	s.Data = append(s.Data, fr.Payload...)
	l.need -= uint64(len(fr.Payload))
	return nil
}

// sectionEnd checks, at the frame at off, that the last section's data is
// whole.
func (l *loader) sectionEnd(off int64) *Error {
	if l.need == 0 {
		return nil
	}
	s := l.meta.Sections[len(l.meta.Sections)-1]
	return l.errorAt(off, fmt.Sprintf("section %q ends after %d of the %d bytes it counts", s.Name, len(s.Data), uint64(len(s.Data))+l.need))
}

// sectionsEnd checks, at the first pairs frame or the end frame, at off,
// that the file held every section the header counts, whole.
func (l *loader) sectionsEnd(off int64) *Error {
	if l.inPairs {
		return nil
	}
	l.inPairs = true
	if err := l.sectionEnd(off); err != nil {
		return err
	}
	if n := len(l.meta.Sections); n != l.sections {
		return l.errorAt(off, fmt.Sprintf("the header counts %d sections, the file holds %d", l.sections, n))
	}
	return nil
}

// end checks the end frame fr against the count and total bytes of the
// pairs read, and that the file ends with it.
func (l *loader) end(fr frame.Frame, count, total uint64, src source) *Error {
	d := &decoder{p: fr.Payload}
	n, size := d.uvarint("end record"), d.uvarint("end record")
	if d.done("end record") != nil {
		return l.errorAt(fr.Offset, "bad end record")
	}
	if n != count || size != total {
		return l.errorAt(fr.Offset, fmt.Sprintf("the end record counts %d pairs of %d bytes, the file holds %d of %d", n, size, count, total))
	}
	// Zeros end a frame file cleanly (see package frame), but no snapshot
	// is written with any.
	after := src.Next()
	if err := l.frameError(after); l.ioErr != nil {
		return err // not what follows the end record, but the file could not be read
	}
	if after.Err != io.EOF || l.size >= 0 && after.Offset != l.size {
		return l.errorAt(after.Offset, "data after the end record")
	}
	return nil
}

// frameError turns the error that ended the frames, if fr carries one,
// into an *Error. An error reading the file is kept in l.ioErr too.
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
	l.ioErr = fr.Err
	return l.errorAt(fr.Offset, fr.Err.Error())
}

func (l *loader) errorAt(off int64, reason string) *Error {
	return &Error{File: l.name, Offset: off, Reason: reason}
}

// first returns whichever of a and b, if any, is at the lower offset.
func first(a, b *Error) *Error {
	if a == nil || (b != nil && b.Offset < a.Offset) {
		return b
	}
	return a
}
