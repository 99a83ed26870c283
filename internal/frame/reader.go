package frame

import (
	"encoding/binary"
	"fmt"
	"io"
	"slices"
)

// zeroChunk is how much of a zero tail Reader reads at a time.
const zeroChunk = 64 << 10

// Reader reads the frames of a file one at a time through io.ReaderAt,
// holding only the frame it returned last: for a file that is not to be
// mapped (vfs.Map keeps a mapping, and the disk space of a removed mapped
// file, for the life of the process), such as one received from a peer and
// checked before it is kept. It checks frames as Scanner does, and ends
// with the same errors at the same offsets.
//
// A damaged len cannot make it allocate more than the file holds: it reads
// a frame only once it knows the file is long enough.
type Reader struct {
	r    io.ReaderAt
	size int64 // of the file
	off  int64 // of the next frame
	buf  []byte
	end  *Frame // the frame that carried the error that ended the frames
}

// NewReader returns a Reader of the frames in the first size bytes of r.
func NewReader(r io.ReaderAt, size int64) *Reader { return &Reader{r: r, size: size} }

// Next returns the next frame, as Ahead.Next does, except that its payload
// is valid only until the next call. An error from r ends the frames with
// that error, at the offset of the frame being read. After the frame that
// carries an error, Next returns that frame again.
func (r *Reader) Next() Frame {
	if r.end != nil {
		return *r.end
	}
	fr := Frame{Offset: r.off}
	fr.Type, fr.Payload, fr.Err = r.next()
	if fr.Err != nil {
		r.end = &fr
	}
	return fr
}

// next reads the frame at r.off, as Scanner.Next does.
func (r *Reader) next() (typ byte, payload []byte, err error) {
	rest := r.size - r.off
	var hdr [HeaderSize]byte
	h := hdr[:min(rest, HeaderSize)]
	if err := r.readAt(h, r.off); err != nil {
		return 0, nil, err
	}
	if isZero(h) {
		switch zero, err := r.zeroTail(r.off + int64(len(h))); {
		case err != nil:
			return 0, nil, err
		case zero:
			return 0, nil, io.EOF
		}
	}
	if len(h) < HeaderSize {
		return 0, nil, r.fail(fmt.Sprintf("file ends %d bytes into a frame header", len(h)), true)
	}
	size := binary.LittleEndian.Uint32(h)
	switch {
	case size == 0 || size > MaxLen:
		return 0, nil, r.fail(fmt.Sprintf("bad frame length %d", size), false)
	case int64(size) > rest-HeaderSize:
		return 0, nil, r.fail(fmt.Sprintf("file ends %d bytes into a frame of %d", rest-HeaderSize, size), true)
	}
	r.buf = slices.Grow(r.buf[:0], int(size))[:size]
	if err := r.readAt(r.buf, r.off+HeaderSize); err != nil {
		return 0, nil, err
	}
	if !check(h, r.buf) {
		return 0, nil, r.fail("checksum mismatch", false)
	}
	next := int64(Size(int(size) - 1))
	if next > rest {
		return 0, nil, r.fail("file ends in a frame's padding", true)
	}
	r.off += next
	return r.buf[0], r.buf[1:size:size], nil
}

// zeroTail reports whether the file holds only zeros from off to its end.
func (r *Reader) zeroTail(off int64) (bool, error) {
	buf := make([]byte, min(r.size-off, zeroChunk))
	for ; off < r.size; off += int64(len(buf)) {
		b := buf[:min(r.size-off, int64(len(buf)))]
		if err := r.readAt(b, off); err != nil {
			return false, err
		}
		if !isZero(b) {
			return false, nil
		}
	}
	return true, nil
}

// readAt fills b from off, which the file holds: a short read means the
// file shrank while it was read.
func (r *Reader) readAt(b []byte, off int64) error {
	n, err := r.r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = fmt.Errorf("frame: the file shrank: %d bytes at offset %d, %d expected", n, off, len(b))
	}
	return err
}

func (r *Reader) fail(reason string, torn bool) error {
	return &Error{Offset: r.off, Reason: reason, Torn: torn}
}
