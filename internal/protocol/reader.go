package protocol

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Kind is the RESP type of a Value.
type Kind byte

// The kinds of reply, named by their type byte.
const (
	KindSimple  Kind = '+'
	KindError   Kind = '-'
	KindInt     Kind = ':'
	KindBulk    Kind = '$'
	KindArray   Kind = '*'
	KindNull    Kind = '_'
	KindDouble  Kind = ','
	KindBool    Kind = '#'
	KindBigNum  Kind = '('
	KindVerbat  Kind = '='
	KindBulkErr Kind = '!'
	KindMap     Kind = '%'
	KindSet     Kind = '~'
	KindPush    Kind = '>'
	KindAttr    Kind = '|'
)

// Value is one decoded reply. Str holds the text of simple strings, errors,
// bulk strings, doubles, big numbers and verbatim strings (with its "txt:"
// prefix removed); Int holds integers and booleans (0 or 1); Elems holds the
// elements of arrays, sets and pushes, and keys and values alternating for
// maps. RESP2 null bulk strings and null arrays decode as KindNull.
type Value struct {
	Kind  Kind
	Str   []byte
	Int   int64
	Elems []Value
}

// IsError reports whether v is an error reply.
func (v Value) IsError() bool { return v.Kind == KindError || v.Kind == KindBulkErr }

// ReaderLimits bound what a Reader accepts from a server.
type ReaderLimits struct {
	MaxBulk  int // longest string, in bytes
	MaxElems int // most elements in one aggregate
	MaxDepth int // deepest nesting of aggregates
}

// DefaultReaderLimits are generous limits for replies from a trusted server.
var DefaultReaderLimits = ReaderLimits{MaxBulk: 512 << 20, MaxElems: 1 << 26, MaxDepth: 64}

// ErrBadReply means the server sent bytes that are not RESP.
var ErrBadReply = errors.New("protocol: malformed reply")

// Reader decodes replies from a buffered stream. It belongs to one goroutine.
type Reader struct {
	r   *bufio.Reader
	lim ReaderLimits
}

// NewReader returns a Reader over r.
func NewReader(r *bufio.Reader, lim ReaderLimits) *Reader { return &Reader{r: r, lim: lim} }

// Read decodes the next reply. Errors are I/O errors from the stream or
// wrap ErrBadReply; after either the stream is unusable.
func (rd *Reader) Read() (Value, error) { return rd.read(0) }

// read decodes the reply at depth, dropping the attributes before it. They
// are skipped in a loop, not by recursion, so that a long run of them cannot
// exhaust the stack; the reply they annotate is still due, so EOF after one
// is unexpected.
func (rd *Reader) read(depth int) (Value, error) {
	v, err := rd.value(depth)
	for err == nil && v.Kind == KindAttr {
		v, err = rd.value(depth)
		err = noEOF(err)
	}
	return v, err
}

// value decodes one element at depth. An attribute is decoded and returned
// as an empty Value of KindAttr.
func (rd *Reader) value(depth int) (Value, error) {
	if depth > rd.lim.MaxDepth {
		return Value{}, fmt.Errorf("%w: nested too deep", ErrBadReply)
	}
	line, err := rd.line()
	if err != nil {
		return Value{}, err
	}
	if len(line) == 0 {
		return Value{}, fmt.Errorf("%w: empty line", ErrBadReply)
	}
	k, body := Kind(line[0]), line[1:]
	switch k {
	case KindSimple, KindError, KindDouble, KindBigNum:
		return Value{Kind: k, Str: body}, nil
	case KindInt:
		n, ok := ParseInt(body)
		if !ok {
			return Value{}, fmt.Errorf("%w: bad integer %q", ErrBadReply, body)
		}
		return Value{Kind: k, Int: n}, nil
	case KindNull:
		return Value{Kind: KindNull}, nil
	case KindBool:
		if len(body) != 1 || (body[0] != 't' && body[0] != 'f') {
			return Value{}, fmt.Errorf("%w: bad boolean", ErrBadReply)
		}
		v := Value{Kind: k}
		if body[0] == 't' {
			v.Int = 1
		}
		return v, nil
	case KindBulk, KindVerbat, KindBulkErr:
		return rd.bulk(k, body)
	case KindArray, KindSet, KindPush, KindMap, KindAttr:
		return rd.aggregate(k, body, depth)
	}
	return Value{}, fmt.Errorf("%w: unknown type byte %q", ErrBadReply, line[0])
}

func (rd *Reader) bulk(k Kind, body []byte) (Value, error) {
	n, ok := ParseInt(body)
	if !ok || n < -1 || n > int64(rd.lim.MaxBulk) {
		return Value{}, fmt.Errorf("%w: bad bulk length %q", ErrBadReply, body)
	}
	if n == -1 {
		return Value{Kind: KindNull}, nil
	}
	buf := make([]byte, n+2)
	if _, err := io.ReadFull(rd.r, buf); err != nil {
		return Value{}, noEOF(err)
	}
	if buf[n] != '\r' || buf[n+1] != '\n' {
		return Value{}, fmt.Errorf("%w: bulk string not followed by CRLF", ErrBadReply)
	}
	s := buf[:n:n]
	if k == KindVerbat {
		if len(s) < 4 || s[3] != ':' {
			return Value{}, fmt.Errorf("%w: bad verbatim string", ErrBadReply)
		}
		s = s[4:]
	}
	if k == KindBulkErr {
		k = KindError
	}
	return Value{Kind: k, Str: s}, nil
}

func (rd *Reader) aggregate(k Kind, body []byte, depth int) (Value, error) {
	n, ok := ParseInt(body)
	if !ok || n < -1 || n > int64(rd.lim.MaxElems) {
		return Value{}, fmt.Errorf("%w: bad aggregate length %q", ErrBadReply, body)
	}
	if n == -1 {
		return Value{Kind: KindNull}, nil
	}
	if k == KindMap || k == KindAttr {
		n *= 2
	}
	// Grow as elements arrive rather than trusting the header with memory.
	elems := make([]Value, 0, min(n, 1024))
	for i := int64(0); i < n; i++ {
		e, err := rd.read(depth + 1)
		if err != nil {
			return Value{}, noEOF(err) // the aggregate has begun
		}
		elems = append(elems, e)
	}
	if k == KindAttr { // attributes annotate the reply that follows them
		return Value{Kind: KindAttr}, nil
	}
	return Value{Kind: k, Elems: elems}, nil
}

// line returns the next CRLF-terminated line without its CRLF. The slice is
// a fresh copy.
func (rd *Reader) line() ([]byte, error) {
	var line []byte
	for {
		chunk, err := rd.r.ReadSlice('\n')
		if len(line)+len(chunk) > rd.lim.MaxBulk {
			return nil, fmt.Errorf("%w: line too long", ErrBadReply)
		}
		line = append(line, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF && len(line) == 0 {
			return nil, io.EOF // the stream ended between replies
		}
		if err != nil {
			return nil, noEOF(err)
		}
		break
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("%w: line not ended by CRLF", ErrBadReply)
	}
	return line[: len(line)-2 : len(line)-2], nil
}

// noEOF turns an EOF in the middle of a reply into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// String renders v compactly for logs and test failures.
func (v Value) String() string {
	switch v.Kind {
	case KindInt, KindBool:
		return strconv.FormatInt(v.Int, 10)
	case KindNull:
		return "(nil)"
	case KindArray, KindSet, KindPush, KindMap:
		s := "["
		for i, e := range v.Elems {
			if i > 0 {
				s += " "
			}
			s += e.String()
		}
		return s + "]"
	case KindError:
		return "(error) " + string(v.Str)
	}
	return strconv.Quote(string(v.Str))
}
