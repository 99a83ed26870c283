package snap_test

import (
	"bytes"
	"errors"
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
