package frame

import (
	"encoding/binary"
	"fmt"
	"io"
)

// Error describes a frame that could not be read: where it starts and why.
type Error struct {
	Offset int64
	Reason string
	// Torn is true when the file ends inside the frame: the frame was being
	// written when the writer stopped. Otherwise the frame is damaged.
	Torn bool
}

func (e *Error) Error() string { return fmt.Sprintf("offset %d: %s", e.Offset, e.Reason) }

// Scanner reads the frames of a whole file held in memory (usually mapped,
// see vfs.Map) one after another, without copying: payloads are slices of
// the file's bytes.
type Scanner struct {
	b   []byte
	off int // offset of the next frame
}

// NewScanner returns a Scanner of the frames in b, the contents of a file
// from offset 0.
func NewScanner(b []byte) *Scanner { return &Scanner{b: b} }

// Offset returns the offset of the next frame: after a successful Next, the
// end of the frame it returned.
func (s *Scanner) Offset() int64 { return int64(s.off) }

// Next checks the next frame and returns its type and payload, which alias
// the scanned bytes. At the clean end of the input, which is its end or
// zeros up to its end (see the package doc), it returns io.EOF and Offset stays where
// the frames end. A frame that cannot be read returns an *Error, and so does
// every later call.
func (s *Scanner) Next() (typ byte, payload []byte, err error) {
	rest := s.b[s.off:]
	switch {
	case len(rest) == 0 || isZero(rest):
		return 0, nil, io.EOF
	case len(rest) < HeaderSize:
		return 0, nil, s.fail(fmt.Sprintf("file ends %d bytes into a frame header", len(rest)), true)
	}
	size := binary.LittleEndian.Uint32(rest)
	switch {
	case size == 0 || size > MaxLen:
		return 0, nil, s.fail(fmt.Sprintf("bad frame length %d", size), false)
	case int64(size) > int64(len(rest)-HeaderSize):
		return 0, nil, s.fail(fmt.Sprintf("file ends %d bytes into a frame of %d", len(rest)-HeaderSize, size), true)
	}
	body := rest[HeaderSize : HeaderSize+size]
	if !check(rest[:HeaderSize], body) {
		return 0, nil, s.fail("checksum mismatch", false)
	}
	next := Size(int(size) - 1)
	if next > len(rest) {
		return 0, nil, s.fail("file ends in a frame's padding", true)
	}
	s.off += next
	return body[0], body[1:len(body):len(body)], nil
}

func (s *Scanner) fail(reason string, torn bool) error {
	return &Error{Offset: int64(s.off), Reason: reason, Torn: torn}
}

// isZero reports whether b holds only zero bytes.
func isZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
