package snap_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path"
	"testing"
	"testing/iotest"

	"github.com/flintkv/flint/internal/seedtest"
	"github.com/flintkv/flint/internal/snap"
)

// TestStream writes streams of several sizes, in writes of random sizes,
// and reads each back whole, or in part (the rest is checked all the
// same); the file is an ordinary snapshot to Verify.
func TestStream(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedtest.Seed(t), 0))
	m := newMem(t)
	for i, n := range []int{0, 1, 64 << 10, 64<<10 + 1, 300 << 10} {
		want := make([]byte, n)
		for k := range want {
			want[k] = byte(rng.Uint32())
		}
		meta := snap.Meta{Index: uint64(i + 1), Term: 3, Conf: jointConf}
		name, _, err := snap.WriteStream(m, dir, meta, func(w io.Writer) error {
			for b := want; len(b) > 0; {
				k := min(len(b), 1+rng.IntN(100<<10))
				if _, err := w.Write(b[:k]); err != nil {
					return err
				}
				b = b[k:]
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := snap.Verify(m, path.Join(dir, name)); err != nil {
			t.Fatalf("Verify of a stream's file: %v", err)
		}
		var got []byte
		gotMeta, err := snap.ReadStream(m, path.Join(dir, name), func(r io.Reader) (err error) {
			got, err = io.ReadAll(iotest.HalfReader(r))
			return err
		})
		if err != nil || !bytes.Equal(got, want) || gotMeta.Index != meta.Index || gotMeta.Term != meta.Term {
			t.Fatalf("%d bytes: read back %d bytes (equal: %v), index %d term %d, %v", n, len(got), bytes.Equal(got, want), gotMeta.Index, gotMeta.Term, err)
		}
		if _, err := snap.ReadStream(m, path.Join(dir, name), func(r io.Reader) error {
			_, err := r.Read(make([]byte, 10))
			return err
		}); n > 0 && err != nil {
			t.Fatalf("reading the first bytes of %d: %v", n, err)
		}
	}
}

// TestStreamFailures: a stream whose write fails leaves no snapshot; a
// damaged one fails its reader and ReadStream; a reader's error is
// ReadStream's.
func TestStreamFailures(t *testing.T) {
	m := newMem(t)
	broken := errors.New("broken")
	if _, _, err := snap.WriteStream(m, dir, snap.Meta{Index: 1, Term: 1}, func(w io.Writer) error {
		w.Write(make([]byte, 100<<10))
		return broken
	}); !errors.Is(err, broken) {
		t.Fatalf("WriteStream with a failing write: %v", err)
	}
	if got := files(t, m); len(got) != 0 {
		t.Fatalf("a failed WriteStream left %v", got)
	}
	name, _, err := snap.WriteStream(m, dir, snap.Meta{Index: 2, Term: 1}, func(w io.Writer) error {
		_, err := w.Write(bytes.Repeat([]byte("x"), 200<<10))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snap.ReadStream(m, path.Join(dir, name), func(io.Reader) error { return broken }); !errors.Is(err, broken) {
		t.Fatalf("ReadStream whose reader fails: %v", err)
	}
	b := readFile(t, m, name)
	b[len(b)/2] ^= 1
	writeFile(t, m, name, b)
	var readErr error
	_, err = snap.ReadStream(m, path.Join(dir, name), func(r io.Reader) error {
		_, readErr = io.ReadAll(r)
		return readErr
	})
	var se *snap.Error
	if !errors.As(err, &se) || !errors.As(readErr, &se) {
		t.Fatalf("ReadStream of a damaged stream: %v, its reader saw %v; want a *snap.Error for both", err, readErr)
	}
}

// windowReader reads r, but fails a read that would take it more than
// window bytes past released.
type windowReader struct {
	r                   io.Reader
	read, released, win int64
}

func (w *windowReader) Read(p []byte) (int, error) {
	room := w.released + w.win - w.read
	if room <= 0 {
		return 0, fmt.Errorf("read %d bytes of the stream, %d past the %d the reader is done with", w.read, w.read-w.released, w.released)
	}
	n, err := w.r.Read(p[:min(int64(len(p)), room)])
	w.read += int64(n)
	return n, err
}

// TestReadFromStreams reads a snapshot of 8 MiB with ReadFrom through a
// reader that fails once read 1 MiB ahead of the pairs put so far: its
// memory is a frame, not the snapshot. A reader's error, or put's, stops
// it with that error.
func TestReadFromStreams(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedtest.Seed(t), 0))
	var ps []pair
	for i := range 2048 {
		val := make([]byte, 4<<10)
		for j := range val {
			val[j] = byte(rng.Uint32())
		}
		ps = append(ps, pair{fmt.Sprintf("key:%05d", i), val})
	}
	meta := snap.Meta{Index: 9, Term: 2, Conf: jointConf, Sections: randomSections(rng)}
	var buf bytes.Buffer
	if _, err := snap.WriteTo(&buf, meta, pairsOf(ps)); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	w := &windowReader{r: bytes.NewReader(b), win: 1 << 20}
	for _, s := range meta.Sections {
		w.released += int64(len(s.Data))
	}
	var got []pair
	gotMeta, err := snap.ReadFrom(w, func(key, val []byte) error {
		got = append(got, pair{string(key), bytes.Clone(val)})
		w.released += int64(len(key) + len(val))
		return nil
	})
	if err != nil {
		t.Fatalf("ReadFrom of a %d-byte snapshot through a 1 MiB window: %v", len(b), err)
	}
	checkMeta(t, gotMeta, meta)
	checkPairs(t, got, ps)

	broken := errors.New("broken")
	if _, err := snap.ReadFrom(io.MultiReader(bytes.NewReader(b[:len(b)/2]), iotest.ErrReader(broken)), func(key, val []byte) error { return nil }); !errors.Is(err, broken) {
		t.Fatalf("ReadFrom of a failing reader: %v", err)
	}
	if _, err := snap.ReadFrom(bytes.NewReader(b), func(key, val []byte) error { return broken }); err != broken {
		t.Fatalf("ReadFrom whose put fails: %v", err)
	}
}
