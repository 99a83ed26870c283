package frame

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"syscall"
	"testing"
)

// TestReaderMatchesScanner reads files that end cleanly, in zeros, or in
// damage with a Reader and with a Scanner: both return the same frames
// and the same end.
func TestReaderMatchesScanner(t *testing.T) {
	good, files := samples()
	files["zeros"] = append(bytes.Clone(good), make([]byte, 3*zeroChunk+5)...)
	files["zeros then a byte"] = append(append(bytes.Clone(good), make([]byte, zeroChunk+8)...), 1)
	files["only zeros"] = make([]byte, 5)
	for name, b := range files {
		t.Run(name, func(t *testing.T) {
			got := readerAll(NewReader(bytes.NewReader(b), int64(len(b))))
			if want := scanAll(NewScanner(b)); !reflect.DeepEqual(got, want) {
				t.Fatalf("Reader read %d frames ending in %v at %d, the scanner %d ending in %v at %d", len(got),
					got[len(got)-1].Err, got[len(got)-1].Offset, len(want), want[len(want)-1].Err, want[len(want)-1].Offset)
			}
		})
	}
}

// samples returns 300 frames, good, and files of frames, by name, that
// end cleanly or in damage of each kind, but for zeros.
func samples() (good []byte, files map[string][]byte) {
	for i := range 300 {
		good = Append(good, byte(i%7+1), fmt.Appendf(nil, "payload %d", i))
	}
	damaged := bytes.Clone(good)
	damaged[len(damaged)/2] ^= 1
	return good, map[string][]byte{
		"clean end":               good,
		"damage":                  damaged,
		"torn":                    good[:len(good)-3],
		"torn header":             good[:len(good)-Size(len("payload 299"))+5],
		"empty":                   nil,
		"a huge len":              append(bytes.Clone(good), 0xff, 0xff, 0xff, 0x3f, 0, 0, 0, 0),
		"damage at offset":        append([]byte{1}, good...),
		"a long frame":            Append(nil, 1, make([]byte, 3<<20)),
		"a long frame, then torn": Append(nil, 1, make([]byte, 3<<20))[:2<<20],
	}
}

// readerAll reads every frame with r, a Reader or a StreamReader, copying
// payloads, and the error that ends them, which Next then returns again.
func readerAll(r interface{ Next() Frame }) []Frame {
	var out []Frame
	for {
		c := r.Next()
		c.Payload = bytes.Clone(c.Payload)
		out = append(out, c)
		if c.Err != nil {
			if again := r.Next(); again.Err != c.Err || again.Offset != c.Offset {
				panic("Next after the end returned another frame")
			}
			return out
		}
	}
}

// failingReaderAt fails every read at or past its offset.
type failingReaderAt struct {
	b   []byte
	off int64
}

func (f failingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > f.off {
		return 0, syscall.EIO
	}
	return copy(p, f.b[off:]), nil
}

// TestReaderErrors: an error reading the file, or a file shorter than its
// size, ends the frames with an error that is not a frame's damage.
func TestReaderErrors(t *testing.T) {
	b := Append(Append(nil, 1, []byte("first")), 2, []byte("second"))
	second := int64(Size(len("first")))
	r := NewReader(failingReaderAt{b, second + 3}, int64(len(b)))
	if fr := r.Next(); fr.Err != nil || string(fr.Payload) != "first" {
		t.Fatalf("first frame: %q, %v", fr.Payload, fr.Err)
	}
	if fr := r.Next(); !errors.Is(fr.Err, syscall.EIO) || fr.Offset != second {
		t.Fatalf("second frame: err %v at %d, want EIO at %d", fr.Err, fr.Offset, second)
	}
	r = NewReader(bytes.NewReader(b[:second+4]), int64(len(b)))
	r.Next()
	var fe *Error
	if fr := r.Next(); fr.Err == nil || errors.As(fr.Err, &fe) {
		t.Fatalf("a file shorter than its size: err %v, want one that is not damage", fr.Err)
	}
}
