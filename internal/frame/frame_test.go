package frame

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"
)

func frames(payloads ...string) []byte {
	var b []byte
	for i, p := range payloads {
		b = Append(b, byte(i+1), []byte(p))
	}
	return b
}

func readAll(b []byte) (payloads []string, err error) {
	r := NewScanner(b)
	for {
		typ, p, err := r.Next()
		if err != nil {
			return payloads, err
		}
		if int(typ) != len(payloads)+1 {
			return payloads, errors.New("wrong type")
		}
		payloads = append(payloads, string(p))
	}
}

func TestRoundTrip(t *testing.T) {
	in := []string{"", "a", "seven b", "eight by", string(make([]byte, 1000))}
	b := frames(in...)
	if len(b)%8 != 0 {
		t.Fatalf("frames end at %d, not a multiple of 8", len(b))
	}
	got, err := readAll(b)
	if err != io.EOF || len(got) != len(in) {
		t.Fatalf("read %d frames, err %v", len(got), err)
	}
	for i := range in {
		if got[i] != in[i] {
			t.Fatalf("frame %d = %q, want %q", i, got[i], in[i])
		}
	}
}

func TestBeginFinishMatchesAppend(t *testing.T) {
	b, start := Begin([]byte("xxxxxxxx"), 7)
	b = append(b, "payload"...)
	b = Finish(b, start)
	if want := Append([]byte("xxxxxxxx"), 7, []byte("payload")); !bytes.Equal(b, want) {
		t.Fatalf("Begin/Finish = %x, Append = %x", b, want)
	}
}

func TestDamage(t *testing.T) {
	good := frames("first", "second", "third")
	second := int64(Size(len("first")))
	cases := []struct {
		name   string
		damage func([]byte) []byte
		ok     int
		off    int64
		torn   bool
	}{
		{"flipped payload byte", func(b []byte) []byte { b[second+10] ^= 1; return b }, 1, second, false},
		{"flipped length", func(b []byte) []byte { b[second] ^= 4; return b }, 1, second, false},
		{"zero length", func(b []byte) []byte { copy(b[second:], make([]byte, 8)); return b }, 1, second, false},
		{"cut in header", func(b []byte) []byte { return b[:second+3] }, 1, second, true},
		{"cut in payload", func(b []byte) []byte { return b[:second+10] }, 1, second, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := readAll(c.damage(bytes.Clone(good)))
			var fe *Error
			if !errors.As(err, &fe) || len(got) != c.ok || fe.Offset != c.off || fe.Torn != c.torn {
				t.Fatalf("read %d frames, err %v; want %d and a torn=%v error at %d", len(got), err, c.ok, c.torn, c.off)
			}
		})
	}
}

// TestZeroTail: zeros after the last frame, as in a file written ahead of
// time, end the frames cleanly; zeros followed by anything are damage.
func TestZeroTail(t *testing.T) {
	good := frames("first", "second")
	got, err := readAll(append(bytes.Clone(good), make([]byte, 4099)...))
	if err != io.EOF || len(got) != 2 {
		t.Fatalf("frames then zeros: read %d frames, err %v; want 2 and io.EOF", len(got), err)
	}
	s := NewScanner(append(bytes.Clone(good), make([]byte, 64)...))
	for range 3 {
		s.Next()
	}
	if s.Offset() != int64(len(good)) {
		t.Fatalf("at the zeros, Offset = %d, want %d where the frames end", s.Offset(), len(good))
	}
	for _, tail := range [][]byte{append(make([]byte, 64), 1), append(make([]byte, 8), frames("third")...)} {
		got, err := readAll(append(bytes.Clone(good), tail...))
		var fe *Error
		if !errors.As(err, &fe) || fe.Torn || fe.Offset != int64(len(good)) || len(got) != 2 {
			t.Fatalf("zeros, then more: read %d frames, err %v; want damage at %d", len(got), err, len(good))
		}
	}
}

func TestFinderNext(t *testing.T) {
	b := frames("first", "second", "third")
	second, third := Size(len("first")), Size(len("first"))+Size(len("second"))
	b[second+10] ^= 1
	if off, ok := findValid(b, second+1); !ok || off != third {
		t.Fatalf("Next = %d, %v; want %d", off, ok, third)
	}
	if _, ok := findValid(b[:third], second+1); ok {
		t.Fatal("Next found a frame in damaged bytes")
	}
	if _, ok := findValid(make([]byte, 4096), 0); ok {
		t.Fatal("Next found a frame in zeros")
	}
}

func FuzzScanner(f *testing.F) {
	f.Add(frames("a", "bc"))
	f.Add(frames("x")[:5])
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewScanner(b)
		var end int64
		for {
			_, p, err := r.Next()
			if err != nil {
				break
			}
			if r.Offset() <= end || r.Offset() > int64(len(b)) || len(p) > len(b) {
				t.Fatalf("offset %d after %d, payload %d of input %d", r.Offset(), end, len(p), len(b))
			}
			end = r.Offset()
		}
		// A Reader reads the same frames and ends the same way.
		if got, want := readerAll(NewReader(bytes.NewReader(b), int64(len(b)))), scanAll(NewScanner(b)); !reflect.DeepEqual(got, want) {
			t.Fatalf("Reader read %d frames ending in %v, the scanner %d ending in %v", len(got), got[len(got)-1].Err, len(want), want[len(want)-1].Err)
		}
		// Every frame read is a valid one, so Next agrees at offset 0.
		if end > 0 {
			if off, ok := findValid(b, 0); !ok || off != 0 {
				t.Fatalf("Next(0) = %d, %v after reading valid frames", off, ok)
			}
		}
	})
}

// findValid is the offset of the first valid frame in b at or after from,
// as a new Finder sees it.
func findValid(b []byte, from int) (int, bool) {
	fr, ok := NewFinder(b).Next(from)
	return int(fr.Offset), ok
}
