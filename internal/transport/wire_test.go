package transport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// TestFrameReader reads streams of good and bad frames.
func TestFrameReader(t *testing.T) {
	two := appendFrame(appendFrame(nil, typeStatus, 0, nil), typeMessages, 9, []byte("payload"))
	flipped := bytes.Clone(two)
	flipped[len(flipped)-1] ^= 1
	long := appendFrame(nil, typeSnapChunk, 1, make([]byte, 101))
	for _, c := range []struct {
		name   string
		stream []byte
		frames int // read before the error
		err    error
	}{
		{"two frames", two, 2, io.EOF},
		{"empty", nil, 0, io.EOF},
		{"cut in a header", two[:headerSize+5], 1, io.ErrUnexpectedEOF},
		{"cut in a payload", two[:len(two)-1], 1, io.ErrUnexpectedEOF},
		{"flipped", flipped, 1, ErrCorrupt},
		{"over the limit", long, 0, ErrFrameTooLarge},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &frameReader{r: bytes.NewReader(c.stream), max: 100}
			var got []frame
			var err error
			for {
				var f frame
				if f, err = r.next(); err != nil {
					break
				}
				f.payload = bytes.Clone(f.payload)
				got = append(got, f)
			}
			if len(got) != c.frames || !errors.Is(err, c.err) {
				t.Fatalf("read %d frames and %v, want %d and %v", len(got), err, c.frames, c.err)
			}
			if c.frames == 2 && (got[1].typ != typeMessages || got[1].group != 9 || string(got[1].payload) != "payload") {
				t.Fatalf("second frame: %+v", got[1])
			}
		})
	}
}

// TestAppendMessagesSplits: messages go in frames of at most the limit, in
// order; a message too large for any frame is left out.
func TestAppendMessagesSplits(t *testing.T) {
	var msgs []raftpb.Message
	for i := range 10 {
		msgs = append(msgs, msg(uint64(i), make([]byte, 30)))
	}
	msgs[4].Entries[0].Data = make([]byte, 300)
	b, tooLarge := appendMessages(nil, 3, msgs, 120)
	if len(tooLarge) != 1 || tooLarge[0].Index != 4 {
		t.Fatalf("too large: %v, want message 4", tooLarge)
	}
	r := &frameReader{r: bytes.NewReader(b), max: 120}
	var got []raftpb.Message
	frames := 0
	for {
		f, err := r.next()
		if err == io.EOF {
			break
		}
		if err != nil || f.typ != typeMessages || f.group != 3 {
			t.Fatalf("frame %d: %+v, %v", frames, f, err)
		}
		ms, err := decodeMessages(f.payload)
		if err != nil {
			t.Fatal(err)
		}
		got, frames = append(got, ms...), frames+1
	}
	want := append(append([]raftpb.Message(nil), msgs[:4]...), msgs[5:]...)
	if !reflect.DeepEqual(got, want) || frames < 3 {
		t.Fatalf("%d frames held %v, want %v in several", frames, got, want)
	}
}

// TestDecodeMessagesMalformed: a payload that is not messages fails with
// ErrMalformed.
func TestDecodeMessagesMalformed(t *testing.T) {
	for name, p := range map[string][]byte{
		"length past the end": {5, 1, 2},
		"bad varint":          bytes.Repeat([]byte{0xff}, 11),
		"not protobuf":        {2, 0xff, 0xff},
	} {
		if _, err := decodeMessages(p); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestSnapshotBody reads snapshot streams, good and bad, as a handler does.
func TestSnapshotBody(t *testing.T) {
	chunks := appendFrame(appendFrame(nil, typeSnapChunk, 4, []byte("hello ")), typeSnapChunk, 4, []byte("world"))
	end := func(total uint64) []byte {
		return appendFrame(nil, typeSnapEnd, 4, binary.LittleEndian.AppendUint64(nil, total))
	}
	flipped := bytes.Clone(chunks)
	flipped[headerSize+1] ^= 1
	for _, c := range []struct {
		name   string
		stream []byte
		read   string
		err    error
	}{
		{"whole", append(bytes.Clone(chunks), end(11)...), "hello world", nil},
		{"no chunks", end(0), "", nil},
		{"bad chunk", append(flipped, end(11)...), "", ErrCorrupt},
		{"wrong total", append(bytes.Clone(chunks), end(12)...), "hello world", ErrCorrupt},
		{"no end", chunks, "hello world", io.ErrUnexpectedEOF},
		{"other group", appendFrame(bytes.Clone(chunks), typeSnapEnd, 5, make([]byte, 8)), "hello world", ErrMalformed},
		{"bad end", appendFrame(bytes.Clone(chunks), typeSnapEnd, 4, nil), "hello world", ErrMalformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := &snapshotBody{r: &frameReader{r: bytes.NewReader(c.stream), max: 100}, group: 4}
			got, err := io.ReadAll(b)
			if string(got) != c.read || !errors.Is(err, c.err) || (c.err == nil) != (b.err == io.EOF) {
				t.Fatalf("read %q and %v, want %q and %v", got, err, c.read, c.err)
			}
		})
	}
}
