package protocol

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"
)

// maxFuzzInput bounds the inputs tried. Longer ones cost more than they
// find: the small limits are crossed within a few dozen bytes, and minimizing
// a new input of 2 KB stalled fuzzing for over 10 s (measured here).
const maxFuzzInput = 512

// FuzzParser parses arbitrary bytes in one piece and in two pieces split at
// a fuzzed point. Neither may panic, every command must satisfy what Next
// promises (checked by feed), and both must parse to the same commands, the
// same error and the same unconsumed bytes.
func FuzzParser(f *testing.F) {
	for _, tc := range parserCases {
		f.Add([]byte(tc.in), uint16(len(tc.in)/2), false)
	}
	f.Add([]byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\nGET k\r\n"), uint16(20), true)
	f.Add([]byte("SET \"a\\x41\\n\" 'b\\'c'\r\n\r\n*0\r\n"), uint16(7), true)
	f.Add([]byte("*2\r\n$67108864\r\n"), uint16(3), true)
	f.Fuzz(func(t *testing.T, data []byte, split uint16, defaults bool) {
		if len(data) > maxFuzzInput {
			return
		}
		lim := small
		if defaults {
			lim = DefaultLimits
		}
		k := int(split) % (len(data) + 1)
		whole := feed(t, lim, data)
		if got := feed(t, lim, data[:k], data[k:]); !got.equal(whole) {
			t.Fatalf("split at %d of %q:\n got %v\nwant %v", k, data, got, whole)
		}
	})
}

// fuzzReaderLimits keep a fuzzed length from allocating much.
var fuzzReaderLimits = ReaderLimits{MaxBulk: 1 << 12, MaxElems: 64, MaxDepth: 8}

// FuzzReader decodes arbitrary bytes as a stream of replies. It must not
// panic, and each error must be a clean end, an unexpected end or a bad
// reply; a clean end comes only once every byte is consumed.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"+OK\r\n", "-ERR x\r\n", ":1\r\n", "$3\r\nfoo\r\n", "$-1\r\n", "*-1\r\n", "_\r\n",
		",1.5\r\n", "#t\r\n", "(12345678901234567890\r\n", "=15\r\ntxt:hello world\r\n",
		"!5\r\nERR x\r\n", "*2\r\n:1\r\n*1\r\n+a\r\n", "%1\r\n+k\r\n~1\r\n>0\r\n",
		"|1\r\n+a\r\n+b\r\n:1\r\n", "*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n",
		"$5\r\nhel", "*3\r\n:1\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			return
		}
		r := bytes.NewReader(data)
		rd := NewReader(bufio.NewReaderSize(r, 16), fuzzReaderLimits)
		for {
			_, err := rd.Read()
			switch {
			case err == nil:
				continue
			case err == io.EOF:
				if r.Len() != 0 {
					t.Fatalf("io.EOF with %d bytes unread", r.Len())
				}
			case err == io.ErrUnexpectedEOF, errors.Is(err, ErrBadReply):
			default:
				t.Fatalf("Read error %v is neither EOF nor ErrBadReply", err)
			}
			return
		}
	})
}
