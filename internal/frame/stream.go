package frame

import (
	"encoding/binary"
	"fmt"
	"io"
	"slices"
)

// streamStep is the most a StreamReader's buffer grows by before the
// bytes it grew for have arrived.
const streamStep = 64 << 10

// StreamReader reads the frames of a stream (an io.Reader: a pipe, a
// connection) one at a time, holding only the frame it returned last: for
// frames that never are in a file of their own, such as a snapshot that
// another stream carries. It checks frames as Reader does, with two
// differences: the stream's size is not known, so a frame cut short is
// found when the stream ends in it; and a stream has no zero tail (it is
// never written ahead of time), so zeros where a frame starts are a bad
// frame length.
//
// A damaged len cannot make it allocate much more than the stream holds:
// its buffer grows as the frame's bytes arrive, by at most 64 KiB or what
// it holds already.
type StreamReader struct {
	r   io.Reader
	off int64 // of the next frame
	buf []byte
	end *Frame // the frame that carried the error that ended the frames
}

// NewStreamReader returns a StreamReader of the frames r streams.
func NewStreamReader(r io.Reader) *StreamReader { return &StreamReader{r: r} }

// Next returns the next frame, as Reader.Next does: its payload is valid
// only until the next call. The stream ending where a frame would start
// ends the frames with io.EOF; an error from r other than io.EOF ends them
// with that error, at the offset of the frame being read. After the frame
// that carries an error, Next returns that frame again.
func (s *StreamReader) Next() Frame {
	if s.end != nil {
		return *s.end
	}
	fr := Frame{Offset: s.off}
	fr.Type, fr.Payload, fr.Err = s.next()
	if fr.Err != nil {
		s.end = &fr
	}
	return fr
}

// next reads the frame at s.off.
func (s *StreamReader) next() (typ byte, payload []byte, err error) {
	var hdr [HeaderSize]byte
	switch n, err := io.ReadFull(s.r, hdr[:]); {
	case err == io.EOF:
		return 0, nil, io.EOF
	case err == io.ErrUnexpectedEOF:
		return 0, nil, s.fail(fmt.Sprintf("stream ends %d bytes into a frame header", n), true)
	case err != nil:
		return 0, nil, err
	}
	size := binary.LittleEndian.Uint32(hdr[:])
	if size == 0 || size > MaxLen {
		return 0, nil, s.fail(fmt.Sprintf("bad frame length %d", size), false)
	}
	if err := s.readBody(Size(int(size)-1) - HeaderSize); err != nil {
		return 0, nil, err
	}
	if !check(hdr[:], s.buf[:size]) {
		return 0, nil, s.fail("checksum mismatch", false)
	}
	s.off += int64(HeaderSize + len(s.buf))
	return s.buf[0], s.buf[1:size:size], nil
}

// readBody reads the n bytes of a frame after its header, padding
// included, into s.buf.
func (s *StreamReader) readBody(n int) error {
	s.buf = s.buf[:0]
	for len(s.buf) < n {
		k := min(n-len(s.buf), max(len(s.buf), streamStep))
		s.buf = slices.Grow(s.buf, k)
		got, err := io.ReadFull(s.r, s.buf[len(s.buf):len(s.buf)+k])
		s.buf = s.buf[:len(s.buf)+got]
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			return s.fail(fmt.Sprintf("stream ends %d bytes into a frame of %d", len(s.buf), n), true)
		case err != nil:
			return err
		}
	}
	return nil
}

func (s *StreamReader) fail(reason string, torn bool) error {
	return &Error{Offset: s.off, Reason: reason, Torn: torn}
}
