package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"math"
)

// Limits bound what a Parser accepts. Every length field is checked against
// them before memory is set aside for it.
type Limits struct {
	MaxBulk   int // longest bulk string argument, in bytes
	MaxArgs   int // most arguments in one command, the command name included
	MaxInline int // longest inline command line, in bytes
	// Unauthenticated marks the tighter limits a server applies before a
	// client has logged in; errors then say so, as Redis's do.
	Unauthenticated bool
}

// ForUnauthenticated returns lim tightened as Redis does for a client that
// has not authenticated: at most 10 arguments and 16 KiB per argument, so
// that a stranger cannot make the server buffer large requests.
func (lim Limits) ForUnauthenticated() Limits {
	lim.MaxArgs, lim.MaxBulk = min(lim.MaxArgs, 10), min(lim.MaxBulk, 16<<10)
	lim.Unauthenticated = true
	return lim
}

// DefaultLimits are the limits a server uses unless configured otherwise:
// Redis 7's (proto-max-bulk-len 512 MiB; a multibulk length up to INT_MAX;
// PROTO_INLINE_MAX_SIZE 64 KiB). A length is a bound, not an allocation:
// the parser keeps 16 bytes per argument as it arrives, and the server
// bounds the input it buffers (see package server).
var DefaultLimits = Limits{
	MaxBulk:   512 << 20,
	MaxArgs:   math.MaxInt32,
	MaxInline: 64 << 10,
}

// ErrIncomplete means the buffer ends before the command does: read more
// bytes and call Next again with the same unconsumed prefix.
var ErrIncomplete = errors.New("protocol: incomplete command")

// Error is a malformed or over-limit request. After one, the stream cannot be
// resynchronised: the server replies "-ERR Protocol error: ..." and closes.
type Error struct{ Msg string }

func (e *Error) Error() string { return "Protocol error: " + e.Msg }

func protoErr(format string, a ...any) error { return &Error{Msg: fmt.Sprintf(format, a...)} }

// span is the position of one parsed argument in the caller's buffer.
type span struct{ off, end int }

// Parser splits a byte stream into commands. The zero value is not usable;
// make one with NewParser. A Parser belongs to one connection and one
// goroutine.
//
// A multi-bulk command that arrives in pieces is resumed where parsing
// stopped, so a command with many arguments costs linear time however it is
// split. State is kept as offsets, so the caller may move or grow its buffer
// between calls as long as the unconsumed bytes stay at its start.
type Parser struct {
	lim Limits

	// State of a multi-bulk command that is partially parsed.
	// Invariant: len(spans) <= nargs when nargs > 0; pos is where the next
	// argument header starts, relative to the start of the command.
	nargs int
	pos   int
	spans []span
}

// NewParser returns a Parser enforcing lim.
func NewParser(lim Limits) *Parser { return &Parser{lim: lim} }

// SetLimits changes the limits from the next command on. A command already
// partly parsed keeps the limits it started with for the arguments parsed.
func (p *Parser) SetLimits(lim Limits) { p.lim = lim }

// Next parses the command at the start of buf. It returns the arguments,
// which alias buf and are valid until buf is modified, and the number of
// bytes the command took. An empty command (a blank inline line, or "*0"
// or any negative count, which Redis ignores too) returns no arguments and a positive n: skip it. ErrIncomplete asks for more
// bytes; an *Error means the stream is malformed. The args slice is reused by
// the next call.
func (p *Parser) Next(buf []byte, args [][]byte) ([][]byte, int, error) {
	if len(buf) == 0 {
		return args[:0], 0, ErrIncomplete
	}
	if p.nargs == 0 && buf[0] != '*' {
		return p.inline(buf, args)
	}
	return p.multiBulk(buf, args)
}

func (p *Parser) multiBulk(buf []byte, args [][]byte) ([][]byte, int, error) {
	if p.nargs == 0 {
		n, next, err := p.header(buf, 0, '*', p.lim.MaxArgs, "multibulk")
		if err != nil {
			return args[:0], 0, err
		}
		if n <= 0 {
			return args[:0], next, nil
		}
		p.nargs, p.pos, p.spans = n, next, p.spans[:0]
	}
	// The loop works on copies of spans and pos, which the compiler keeps
	// in registers; p gets them back when it waits for more bytes, and the
	// array of spans when it is done.
	spans, pos := p.spans, p.pos
	for len(spans) < p.nargs {
		size, next, err := p.header(buf, pos, '$', p.lim.MaxBulk, "bulk")
		if err != nil {
			if err == ErrIncomplete {
				p.spans, p.pos = spans, pos
			} else {
				p.reset(spans)
			}
			return args[:0], 0, err
		}
		if size < 0 {
			p.reset(spans)
			return args[:0], 0, protoErr("invalid bulk length")
		}
		end := next + size
		if len(buf) < end+2 {
			p.spans, p.pos = spans, pos
			return args[:0], 0, ErrIncomplete
		}
		// The two bytes after the string are skipped unread, as Redis
		// skips them: they should be CRLF.
		spans = append(spans, span{next, end})
		pos = end + 2
	}
	args = args[:0]
	for _, s := range spans {
		args = append(args, buf[s.off:s.end:s.end])
	}
	p.reset(spans)
	return args, pos, nil
}

// Pending returns how many arguments of a command that is not yet
// complete the parser holds (16 bytes each).
func (p *Parser) Pending() int { return len(p.spans) }

// Reset forgets a command partly parsed: the next call to Next parses buf
// from its start, as a new command.
func (p *Parser) Reset() { p.reset(p.spans) }

// reset forgets the command being parsed, keeping spans's array for the
// next one unless it grew for a command of very many arguments.
func (p *Parser) reset(spans []span) {
	if cap(spans) > maxKeptSpans {
		spans = nil
	}
	p.nargs, p.pos, p.spans = 0, 0, spans[:0]
}

// maxKeptSpans is the most spans a Parser keeps for the next command.
const maxKeptSpans = 1024

// header reads "<prefix><decimal>\r\n" at buf[at:]. It returns the number,
// which may be negative and is at most limit, and the offset just past the
// CRLF. As in Redis, the byte after the CR may be any byte.
func (p *Parser) header(buf []byte, at int, prefix byte, limit int, what string) (int, int, error) {
	if at >= len(buf) {
		return 0, 0, ErrIncomplete
	}
	if buf[at] != prefix {
		return 0, 0, protoErr("expected '%c', got '%s'", prefix, replyByte(buf[at]))
	}
	if n, next, ok := shortLength(buf, at+1); ok && n <= limit {
		return n, next, nil
	}
	return p.length(buf, at+1, limit, what)
}

// length reads the rest of a header, "<decimal>\r\n" at buf[at:], and
// returns what header does. shortLength is its fast path, and agrees with it
// wherever it answers (TestShortLength).
func (p *Parser) length(buf []byte, at, limit int, what string) (int, int, error) {
	// A length line is short; an endless one is an attack, not a number.
	const maxLine = 32
	line := buf[at:]
	i := bytes.IndexByte(line[:min(len(line), maxLine)], '\r')
	if i < 0 {
		if len(line) >= maxLine {
			return 0, 0, protoErr("invalid %s length", what)
		}
		return 0, 0, ErrIncomplete
	}
	if i+1 >= len(line) {
		return 0, 0, ErrIncomplete
	}
	n, ok := ParseInt(line[:i])
	if !ok {
		return 0, 0, protoErr("invalid %s length", what)
	}
	if n > int64(limit) {
		if p.lim.Unauthenticated {
			return 0, 0, protoErr("unauthenticated %s length", what)
		}
		return 0, 0, protoErr("invalid %s length", what)
	}
	return int(n), at + i + 2, nil
}

// shortLength reads what clients nearly always send after a prefix: up to
// 9 decimal digits, without a leading zero (unless the number is 0), then
// CRLF. It returns the number and the offset just past the CRLF, or false
// for anything else (a sign, a longer number, bytes not yet read, a
// malformed line), which header then parses or rejects in full. It saves
// header's search for the CR and its second pass over the digits.
func shortLength(buf []byte, at int) (int, int, bool) {
	const maxDigits = 9 // 999,999,999 fits an int on every platform
	n, i := 0, at
	for ; i < len(buf) && i-at < maxDigits && buf[i]-'0' <= 9; i++ {
		n = n*10 + int(buf[i]-'0')
	}
	digits := i - at
	if digits == 0 || (digits > 1 && buf[at] == '0') || i+1 >= len(buf) || buf[i] != '\r' || buf[i+1] != '\n' {
		return 0, 0, false
	}
	return n, i + 2, true
}

// inline parses one line of space-separated words, as Redis does: the
// line ends at the first LF, and one CR before it is dropped. A NUL byte
// before the LF hides it, as it does from Redis's strchr: the line is then
// incomplete until it is too big.
func (p *Parser) inline(buf []byte, args [][]byte) ([][]byte, int, error) {
	window := buf[:min(len(buf), p.lim.MaxInline+2)]
	nl := bytes.IndexByte(window, '\n')
	if nl >= 0 && bytes.IndexByte(window[:nl], 0) >= 0 {
		nl = -1
	}
	if nl < 0 {
		// A line of MaxInline bytes may have arrived with its CR but not
		// yet its LF: that is incomplete, not too big.
		if len(buf) > p.lim.MaxInline+1 || (len(buf) == p.lim.MaxInline+1 && buf[p.lim.MaxInline] != '\r') {
			return args[:0], 0, protoErr("too big inline request")
		}
		return args[:0], 0, ErrIncomplete
	}
	line := buf[:nl]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	if len(line) > p.lim.MaxInline {
		return args[:0], 0, protoErr("too big inline request")
	}
	args, err := SplitArgs(line, args[:0], p.lim.MaxArgs)
	if err != nil {
		return args[:0], 0, err
	}
	return args, nl + 1, nil
}

// SplitArgs splits an inline command line into words, appending to args,
// exactly as Redis's sdssplitargs does (and so redis-cli): words are
// separated by whitespace; a word is unquoted bytes up to a space, tab, CR
// or LF, which may end in one quoted part, after which the word ends and
// whitespace or the end of the line must follow. So a"b" is ab, and "a"b
// is an error. In double quotes \n, \r, \t, \b, \a and \xHH are escapes,
// and a backslash takes any other byte as it is; in single quotes only \'
// is. A NUL byte ends the line (inside quotes: unterminated). Words without
// quotes alias line; others are fresh copies.
func SplitArgs(line []byte, args [][]byte, maxArgs int) ([][]byte, error) {
	i := 0
	for {
		for i < len(line) && isSpace(line[i]) {
			i++
		}
		if i == len(line) || line[i] == 0 {
			return args, nil
		}
		if len(args) >= maxArgs {
			return args, protoErr("too many arguments in inline request")
		}
		word, next, err := splitWord(line, i)
		if err != nil {
			return args, err
		}
		args = append(args, word)
		i = next
	}
}

// splitWord reads the word that starts at line[i], and returns it and
// where it ends.
func splitWord(line []byte, i int) ([]byte, int, error) {
	start := i
	for i < len(line) && !endsWord(line[i]) && line[i] != '"' && line[i] != '\'' {
		i++
	}
	if i == len(line) || endsWord(line[i]) {
		return line[start:i:i], i, nil
	}
	w := append([]byte{}, line[start:i]...)
	var err error
	if line[i] == '"' {
		w, i, err = doubleQuoted(line, i+1, w)
	} else {
		w, i, err = singleQuoted(line, i+1, w)
	}
	if err == nil && i < len(line) && line[i] != 0 && !isSpace(line[i]) {
		err = protoErr("unbalanced quotes in request")
	}
	return w, i, err
}

// endsWord reports whether c ends an unquoted word: fewer bytes than
// isSpace, as in Redis.
func endsWord(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == 0 }

// doubleQuoted appends to w the double-quoted part that starts at
// line[i], just past its quote, and returns w and the offset past its
// closing quote.
func doubleQuoted(line []byte, i int, w []byte) ([]byte, int, error) {
	for ; i < len(line) && line[i] != 0; i++ {
		c := line[i]
		switch {
		case c == '"':
			return w, i + 1, nil
		case c == '\\' && i+3 < len(line) && line[i+1] == 'x' && isHex(line[i+2]) && isHex(line[i+3]):
			w = append(w, unhex(line[i+2])<<4|unhex(line[i+3]))
			i += 3
		case c == '\\' && i+1 < len(line) && line[i+1] != 0:
			i++
			w = append(w, unescape(line[i]))
		default:
			w = append(w, c)
		}
	}
	return nil, 0, protoErr("unbalanced quotes in request")
}

// singleQuoted is doubleQuoted for a single-quoted part.
func singleQuoted(line []byte, i int, w []byte) ([]byte, int, error) {
	for ; i < len(line) && line[i] != 0; i++ {
		c := line[i]
		switch {
		case c == '\'':
			return w, i + 1, nil
		case c == '\\' && i+1 < len(line) && line[i+1] == '\'':
			w = append(w, '\'')
			i++
		default:
			w = append(w, c)
		}
	}
	return nil, 0, protoErr("unbalanced quotes in request")
}

func unescape(c byte) byte {
	switch c {
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case 'b':
		return '\b'
	case 'a':
		return '\a'
	}
	return c
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// replyByte is c as Redis quotes it in an error reply: itself, but for CR
// and LF, which would end the reply, as spaces.
func replyByte(c byte) string {
	if c == '\r' || c == '\n' {
		c = ' '
	}
	return string([]byte{c})
}

// ParseInt parses a base-10 signed 64-bit integer the way Redis does: no
// sign on zero-padded or empty input, no spaces, no overflow.
func ParseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
		if len(b) == 0 {
			return 0, false
		}
	}
	if b[0] == '0' && (len(b) > 1 || neg) {
		return 0, false
	}
	var u uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if u > (1<<64-1-d)/10 {
			return 0, false
		}
		u = u*10 + d
	}
	if neg {
		if u > 1<<63 {
			return 0, false
		}
		return -int64(u), true
	}
	if u > 1<<63-1 {
		return 0, false
	}
	return int64(u), true
}
