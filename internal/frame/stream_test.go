package frame

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"
	"testing/iotest"
)

// TestStreamReaderMatchesScanner reads streams that end cleanly or in
// damage, in pieces of every size, with a StreamReader and with a Scanner:
// both return the same frames, and end at the same offset, cleanly or in
// damage of the same kind (torn or not). Zeros, the end of a file written
// ahead of time, are a bad frame length in a stream.
func TestStreamReaderMatchesScanner(t *testing.T) {
	good, files := samples()
	for name, b := range files {
		t.Run(name, func(t *testing.T) {
			want := scanAll(NewScanner(b))
			for _, r := range []io.Reader{bytes.NewReader(b), iotest.HalfReader(bytes.NewReader(b)), iotest.OneByteReader(bytes.NewReader(b))} {
				got := readerAll(NewStreamReader(r))
				if err := sameFrames(got, want); err != nil {
					t.Fatalf("%T: %v", r, err)
				}
			}
		})
	}
	got := readerAll(NewStreamReader(bytes.NewReader(append(bytes.Clone(good), make([]byte, 16)...))))
	var fe *Error
	if end := got[len(got)-1]; !errors.As(end.Err, &fe) || fe.Torn || end.Offset != int64(len(good)) {
		t.Fatalf("zeros after the frames end them with %v at %d, want a bad frame length at %d", end.Err, end.Offset, len(good))
	}
}

// sameFrames returns how got, a StreamReader's frames, differ from want,
// a Scanner's, if they do.
func sameFrames(got, want []Frame) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d frames, the scanner %d", len(got), len(want))
	}
	for i := range got[:len(got)-1] {
		g, w := got[i], want[i]
		if g.Offset != w.Offset || g.Type != w.Type || !bytes.Equal(g.Payload, w.Payload) {
			return fmt.Errorf("frame %d differs from the scanner's", i)
		}
	}
	g, w := got[len(got)-1], want[len(want)-1]
	var ge, we *Error
	switch {
	case g.Offset != w.Offset:
		return fmt.Errorf("ends at %d, the scanner at %d", g.Offset, w.Offset)
	case g.Err == io.EOF || w.Err == io.EOF:
		if g.Err != w.Err {
			return fmt.Errorf("ends with %v, the scanner with %v", g.Err, w.Err)
		}
	case !errors.As(g.Err, &ge) || !errors.As(w.Err, &we) || ge.Torn != we.Torn || ge.Offset != we.Offset:
		return fmt.Errorf("ends with %v, the scanner with %v", g.Err, w.Err)
	}
	return nil
}

// TestStreamReaderBounded: a len of 1 GiB in a stream that holds a few
// bytes after it grows the buffer by 64 KiB, not to the len; an error of
// the stream ends the frames with it, at the frame being read.
func TestStreamReaderBounded(t *testing.T) {
	b := Append(nil, 1, []byte("first"))
	second := int64(len(b))
	b = append(b, 0xff, 0xff, 0xff, 0x3f, 0, 0, 0, 0, 1, 2, 3)
	s := NewStreamReader(bytes.NewReader(b))
	s.Next()
	var fe *Error
	if fr := s.Next(); !errors.As(fr.Err, &fe) || !fe.Torn || fr.Offset != second {
		t.Fatalf("a huge len: %v at %d, want a torn frame at %d", fr.Err, fr.Offset, second)
	}
	if cap(s.buf) > 2*streamStep {
		t.Fatalf("a huge len grew the buffer to %d bytes", cap(s.buf))
	}
	s = NewStreamReader(io.MultiReader(bytes.NewReader(b[:second+3]), iotest.ErrReader(syscall.EIO)))
	s.Next()
	if fr := s.Next(); !errors.Is(fr.Err, syscall.EIO) || fr.Offset != second {
		t.Fatalf("a failing stream: %v at %d, want EIO at %d", fr.Err, fr.Offset, second)
	}
}
