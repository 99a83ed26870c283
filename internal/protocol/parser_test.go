package protocol

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// small are limits low enough that tests can cross each of them cheaply.
var small = Limits{MaxBulk: 16, MaxArgs: 4, MaxInline: 12}

// outcome is what a stream parsed to: the commands in order (an empty
// command is an empty slice), the final error (nil when the parser is
// waiting for more bytes) and how many bytes were left unconsumed.
type outcome struct {
	cmds [][]string
	err  string
	rest int
}

func (o outcome) String() string { return fmt.Sprintf("cmds=%q err=%q rest=%d", o.cmds, o.err, o.rest) }

func (o outcome) equal(p outcome) bool {
	return o.err == p.err && o.rest == p.rest && slices.EqualFunc(o.cmds, p.cmds, slices.Equal)
}

// feed parses a stream the way a connection receives it: each chunk is
// appended to the unconsumed bytes, and Next is called until it asks for more.
// After every call it checks what Next promises about n and the arguments.
func feed(tb testing.TB, lim Limits, chunks ...[]byte) outcome {
	tb.Helper()
	p := NewParser(lim)
	var buf []byte
	var args [][]byte
	var o outcome
	for _, c := range chunks {
		buf = append(buf, c...)
		for {
			var n int
			var err error
			args, n, err = p.Next(buf, args)
			if errors.Is(err, ErrIncomplete) {
				break
			}
			if err != nil {
				var pe *Error
				if !errors.As(err, &pe) {
					tb.Fatalf("Next returned %T %v, want *Error or ErrIncomplete", err, err)
				}
				o.err = err.Error()
				return o
			}
			checkCommand(tb, buf, args, n)
			cmd := []string{}
			for _, a := range args {
				cmd = append(cmd, string(a))
			}
			o.cmds = append(o.cmds, cmd)
			buf = buf[n:]
		}
	}
	o.rest = len(buf)
	return o
}

// checkCommand checks one successful Next: 0 < n <= len(buf), and the
// arguments of a multi-bulk command lie inside buf[:n] and re-encode to
// those bytes (ParseInt admits one spelling of each length), but for the
// bytes the parser skips unread where CRLF belongs.
func checkCommand(tb testing.TB, buf []byte, args [][]byte, n int) {
	tb.Helper()
	if n <= 0 || n > len(buf) {
		tb.Fatalf("Next consumed %d of %d bytes", n, len(buf))
	}
	if buf[0] != '*' {
		if buf[n-1] != '\n' {
			tb.Fatalf("inline command %q does not end at a newline", buf[:n])
		}
		return
	}
	for i, a := range args {
		if !within(buf[:n], a) {
			tb.Fatalf("argument %d (%q) is not inside the command's bytes", i, a)
		}
	}
	cmd := buf[:n]
	if len(args) == 0 {
		if len(cmd) < 4 || (cmd[1] != '0' && cmd[1] != '-') {
			tb.Fatalf("empty command from %q", cmd)
		}
		return
	}
	re := AppendCommand(nil, args...)
	same := len(re) == len(cmd)
	for i := 0; same && i < len(re); i++ {
		same = re[i] == cmd[i] || re[i] == '\r' || re[i] == '\n'
	}
	if !same {
		tb.Fatalf("command %q parsed to %q, which encodes as %q", cmd, args, re)
	}
}

// within reports whether sub lies inside buf's memory.
func within(buf, sub []byte) bool {
	if len(sub) == 0 {
		return true
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(sub)))
	return p >= lo && p+uintptr(len(sub)) <= lo+uintptr(len(buf))
}

func cmds(c ...[]string) [][]string { return c }

func words(s string) []string { return strings.Fields(s) }

// parserCases are streams with what they parse to under small limits. Each
// is also parsed split at every byte by TestParserSplitAnywhere.
var parserCases = []struct {
	name string
	in   string
	want outcome
}{
	// Multi-bulk commands.
	{"get", "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", outcome{cmds: cmds(words("GET k"))}},
	{"empty arg", "*2\r\n$3\r\nGET\r\n$0\r\n\r\n", outcome{cmds: cmds([]string{"GET", ""})}},
	{"binary arg", "*1\r\n$4\r\n\r\n\x00\xff\r\n", outcome{cmds: cmds([]string{"\r\n\x00\xff"})}},
	{"pipeline", "*1\r\n$4\r\nPING\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n",
		outcome{cmds: cmds(words("PING"), words("SET k v"))}},
	{"at MaxArgs", "*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n", outcome{cmds: cmds(words("a b c d"))}},
	{"at MaxBulk", "*1\r\n$16\r\n0123456789abcdef\r\n", outcome{cmds: cmds(words("0123456789abcdef"))}},
	{"empty *0", "*0\r\n", outcome{cmds: cmds([]string{})}},
	{"empty *-1", "*-1\r\n", outcome{cmds: cmds([]string{})}},
	{"empty *-10", "*-10\r\n", outcome{cmds: cmds([]string{})}},
	{"multibulk CR and any byte", "*1\rx$4\r\nPING\r\n", outcome{cmds: cmds(words("PING"))}},
	{"bulk CR and any byte", "*1\r\n$4\rxPING\r\n", outcome{cmds: cmds(words("PING"))}},
	// As in Redis, the two bytes after a bulk string are skipped unread.
	{"no CRLF after bulk", "*1\r\n$3\r\nGETxx", outcome{cmds: cmds(words("GET"))}},
	{"LF CR after bulk", "*1\r\n$3\r\nGET\n\r", outcome{cmds: cmds(words("GET"))}},
	{"bulk longer than length", "*1\r\n$2\r\nGET\r\n", outcome{cmds: cmds(words("GE"), []string{})}},
	{"bulk then pipeline", "*2\r\n$4\r\nECHO\r\n$1\r\nabc\r\n*1\r\n$4\r\nPING\r\n",
		outcome{cmds: cmds(words("ECHO a"), []string{}, words("PING"))}},
	{"empty then command", "*0\r\n*1\r\n$4\r\nPING\r\n", outcome{cmds: cmds([]string{}, words("PING"))}},
	{"incomplete header", "*2\r", outcome{rest: 3}},
	{"incomplete bulk", "*2\r\n$3\r\nGET\r\n$1\r\nk", outcome{rest: 18}},
	{"complete then incomplete", "*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPI", outcome{cmds: cmds(words("PING")), rest: 10}},

	// Inline commands.
	{"inline crlf", "GET k\r\n", outcome{cmds: cmds(words("GET k"))}},
	{"inline lf", "GET k\n", outcome{cmds: cmds(words("GET k"))}},
	{"inline spaces", " \tSET  k\tv \r\n", outcome{cmds: cmds(words("SET k v"))}},
	{"inline quotes", "S \"a\" 'c d'\n", outcome{cmds: cmds([]string{"S", "a", "c d"})}},
	{"blank crlf", "\r\n", outcome{cmds: cmds([]string{})}},
	{"blank lf", "\n", outcome{cmds: cmds([]string{})}},
	{"blank spaces", "   \r\n", outcome{cmds: cmds([]string{})}},
	{"inline then multi-bulk", "PING\r\n*1\r\n$4\r\nPING\r\n", outcome{cmds: cmds(words("PING"), words("PING"))}},
	{"inline at MaxInline", "123456789012\r\n", outcome{cmds: cmds(words("123456789012"))}},
	{"inline at MaxInline lf", "123456789012\n", outcome{cmds: cmds(words("123456789012"))}},
	{"inline incomplete", "GET k", outcome{rest: 5}},
	{"inline at MaxInline incomplete", "123456789012\r", outcome{rest: 13}},
	{"inline at MaxArgs", "a b c d\n", outcome{cmds: cmds(words("a b c d"))}},
	{"inline quote in a word", "SET k a\"b\"\r\n", outcome{cmds: cmds(words("SET k ab"))}},
	{"inline vertical tab in a word", "a\vb \vc\n", outcome{cmds: cmds([]string{"a\vb", "c"})}},
	// A NUL hides the newline after it, as from Redis's strchr.
	{"inline NUL", "a\x00b\r\n", outcome{rest: 5}},
	{"inline NUL too big", "a\x00b\r\nPING\r\nPING\r\n", outcome{err: "Protocol error: too big inline request"}},

	// Errors.
	{"bad type byte", "*1\r\n+PING\r\n", outcome{err: "Protocol error: expected '$', got '+'"}},
	{"bad type byte unprintable", "*1\r\n\x00", outcome{err: "Protocol error: expected '$', got '\x00'"}},
	{"bad type byte LF", "*1\r\n\n", outcome{err: "Protocol error: expected '$', got ' '"}},
	{"bad type byte high", "*1\r\n\xfe", outcome{err: "Protocol error: expected '$', got '\xfe'"}},
	{"bad multibulk length", "*x\r\n", outcome{err: "Protocol error: invalid multibulk length"}},
	{"empty multibulk length", "*\r\n", outcome{err: "Protocol error: invalid multibulk length"}},
	{"plus multibulk length", "*+1\r\n", outcome{err: "Protocol error: invalid multibulk length"}},
	{"zero-padded multibulk length", "*01\r\n", outcome{err: "Protocol error: invalid multibulk length"}},
	{"multibulk length overflow", "*99999999999999999999\r\n", outcome{err: "Protocol error: invalid multibulk length"}},
	{"multibulk length line too long", "*" + strings.Repeat("1", 40), outcome{err: "Protocol error: invalid multibulk length"}},
	{"over MaxArgs", "*5\r\n", outcome{err: "Protocol error: invalid multibulk length"}},
	{"bad bulk length", "*1\r\n$x\r\n", outcome{err: "Protocol error: invalid bulk length"}},
	{"bulk length -1", "*1\r\n$-1\r\n", outcome{err: "Protocol error: invalid bulk length"}},
	{"bulk length -2", "*1\r\n$-2\r\n", outcome{err: "Protocol error: invalid bulk length"}},
	{"bulk length -0", "*1\r\n$-0\r\n", outcome{err: "Protocol error: invalid bulk length"}},
	{"over MaxBulk", "*1\r\n$17\r\n", outcome{err: "Protocol error: invalid bulk length"}},
	{"huge bulk length", "*1\r\n$9223372036854775807\r\n", outcome{err: "Protocol error: invalid bulk length"}},
	{"bulk length line too long", "*1\r\n$" + strings.Repeat("0", 40), outcome{err: "Protocol error: invalid bulk length"}},
	{"error after good command", "*1\r\n$4\r\nPING\r\n*1\r\n:1\r\n",
		outcome{cmds: cmds(words("PING")), err: "Protocol error: expected '$', got ':'"}},
	{"over MaxInline", "1234567890123\r\n", outcome{err: "Protocol error: too big inline request"}},
	{"over MaxInline lf", "1234567890123\n", outcome{err: "Protocol error: too big inline request"}},
	{"over MaxInline no newline", "12345678901234", outcome{err: "Protocol error: too big inline request"}},
	{"over MaxInline by a byte then CR", "1234567890123\r", outcome{err: "Protocol error: too big inline request"}},
	{"over MaxArgs inline", "a b c d e\n", outcome{err: "Protocol error: too many arguments in inline request"}},
	{"unbalanced double quote", "GET \"k\n", outcome{err: "Protocol error: unbalanced quotes in request"}},
	{"unbalanced single quote", "GET 'k\n", outcome{err: "Protocol error: unbalanced quotes in request"}},
	{"text after closing quote", "GET \"k\"x\n", outcome{err: "Protocol error: unbalanced quotes in request"}},
}

func TestParser(t *testing.T) {
	for _, tc := range parserCases {
		t.Run(tc.name, func(t *testing.T) {
			got := feed(t, small, []byte(tc.in))
			if !got.equal(tc.want) {
				t.Errorf("parse %q:\n got %v\nwant %v", tc.in, got, tc.want)
			}
		})
	}
}

// TestParserSplitAnywhere checks that a stream arriving in two pieces, split
// at any byte, or one byte at a time, parses as it does in one piece: the
// parser resumes rather than restarts, and an incomplete prefix is never
// judged differently from the whole.
func TestParserSplitAnywhere(t *testing.T) {
	for _, tc := range parserCases {
		t.Run(tc.name, func(t *testing.T) {
			in := []byte(tc.in)
			whole := feed(t, small, in)
			for k := 0; k <= len(in); k++ {
				if got := feed(t, small, in[:k], in[k:]); !got.equal(whole) {
					t.Fatalf("split at %d of %q:\n got %v\nwant %v", k, in, got, whole)
				}
			}
			var bytewise [][]byte
			for i := range in {
				bytewise = append(bytewise, in[i:i+1])
			}
			if got := feed(t, small, bytewise...); !got.equal(whole) {
				t.Fatalf("%q a byte at a time:\n got %v\nwant %v", in, got, whole)
			}
		})
	}
}

// TestParserHugeCommand parses a command of many arguments of varied sizes
// that arrives in thousands of pieces of random sizes.
func TestParserHugeCommand(t *testing.T) {
	const nargs = 20000
	rng := rand.New(rand.NewPCG(1, 2))
	args := make([][]byte, nargs)
	for i := range args {
		a := make([]byte, rng.IntN(40))
		for j := range a {
			a[j] = byte(rng.IntN(256))
		}
		args[i] = a
	}
	in := AppendCommand(nil, args...)
	in = append(in, "*1\r\n$4\r\nPING\r\n"...)
	var chunks [][]byte
	for rest := in; len(rest) > 0; {
		n := min(len(rest), 1+rng.IntN(64))
		chunks = append(chunks, rest[:n])
		rest = rest[n:]
	}
	got := feed(t, DefaultLimits, chunks...)
	if got.err != "" || got.rest != 0 || len(got.cmds) != 2 {
		t.Fatalf("got err=%q rest=%d and %d commands, want 2 commands", got.err, got.rest, len(got.cmds))
	}
	if len(got.cmds[0]) != nargs {
		t.Fatalf("got %d arguments, want %d", len(got.cmds[0]), nargs)
	}
	for i, a := range got.cmds[0] {
		if a != string(args[i]) {
			t.Fatalf("argument %d = %q, want %q", i, a, args[i])
		}
	}
	if !slices.Equal(got.cmds[1], []string{"PING"}) {
		t.Fatalf("second command = %q, want PING", got.cmds[1])
	}
}

// TestParserMovedBuffer checks that a parser keeps offsets, not pointers: the
// caller may copy the unconsumed bytes to a new buffer between calls.
func TestParserMovedBuffer(t *testing.T) {
	in := []byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n")
	p := NewParser(DefaultLimits)
	var args [][]byte
	var err error
	for k := 1; k < len(in); k++ {
		buf := append([]byte(nil), in[:k]...) // a fresh buffer each time
		if _, _, err = p.Next(buf, args); !errors.Is(err, ErrIncomplete) {
			t.Fatalf("Next(%q) = %v, want ErrIncomplete", buf, err)
		}
	}
	buf := append([]byte(nil), in...)
	args, n, err := p.Next(buf, args)
	if err != nil || n != len(in) {
		t.Fatalf("Next = %d, %v; want %d, nil", n, err, len(in))
	}
	if got := fmt.Sprintf("%q", args); got != `["SET" "k" "value"]` {
		t.Fatalf("args = %s", got)
	}
}

// TestParserResetAfterError checks that an error mid-command drops the
// partial state: a new stream given to the same parser starts afresh.
func TestParserResetAfterError(t *testing.T) {
	p := NewParser(small)
	if _, _, err := p.Next([]byte("*2\r\n$1\r\na\r\n$x\r\n"), nil); err == nil || errors.Is(err, ErrIncomplete) {
		t.Fatalf("Next = %v, want a protocol error", err)
	}
	args, n, err := p.Next([]byte("PING\r\n"), nil)
	if err != nil || n != 6 || len(args) != 1 || string(args[0]) != "PING" {
		t.Fatalf("Next after error = %q, %d, %v; want [PING], 6, nil", args, n, err)
	}
}

// TestParserReset checks that Reset drops a command partly parsed: the
// next buffer is parsed from its start, as a new command.
func TestParserReset(t *testing.T) {
	p := NewParser(small)
	if _, _, err := p.Next([]byte("*3\r\n$4\r\nMGET\r\n$2\r\nk1\r\n$2\r\nk"), nil); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("Next = %v, want ErrIncomplete", err)
	}
	p.Reset()
	in := "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"
	args, n, err := p.Next([]byte(in), nil)
	if err != nil || n != len(in) || fmt.Sprintf("%q", args) != `["GET" "k"]` {
		t.Fatalf("Next after Reset = %q, %d, %v; want [GET k], %d, nil", args, n, err, len(in))
	}
}

func TestParserEmptyBuffer(t *testing.T) {
	args, n, err := NewParser(small).Next(nil, [][]byte{[]byte("stale")})
	if !errors.Is(err, ErrIncomplete) || n != 0 || len(args) != 0 {
		t.Fatalf("Next(nil) = %q, %d, %v; want [], 0, ErrIncomplete", args, n, err)
	}
}

func TestSplitArgs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  bool
	}{
		{in: "", want: nil},
		{in: " \t\r\n\v\f", want: nil},
		{in: "a\x00b c", want: []string{"a"}}, // a NUL ends the line
		{in: "\"a\x00\"", err: true},
		{in: "a", want: []string{"a"}},
		{in: "  a \t b\vc\fd  ", want: []string{"a", "b\vc\fd"}}, // only space, tab, CR and LF end a word
		{in: "\va\f", want: []string{"a\f"}},
		{in: `""`, want: []string{""}},
		{in: `''`, want: []string{""}},
		{in: `"a b" c`, want: []string{"a b", "c"}},
		{in: `"\n\r\t\b\a\"\\\q"`, want: []string{"\n\r\t\b\a\"\\q"}},
		{in: `"\x41\x6a\x6A\xff\x4F\x4f\x09"`, want: []string{"Ajj\xffOO\t"}},
		{in: `"\xZZ"`, want: []string{"xZZ"}},
		{in: `"\x4"`, want: []string{"x4"}},
		{in: `'it\'s' '\n'`, want: []string{"it's", `\n`}},
		{in: `'a"b' "c'd"`, want: []string{`a"b`, "c'd"}},
		{in: `a"b"`, want: []string{"ab"}}, // a quote inside a word starts a quoted part
		{in: `a'b c' d`, want: []string{"ab c", "d"}},
		{in: `a"b"c`, err: true},
		{in: "\"a\"\vb", want: []string{"a", "b"}}, // after a quote, any whitespace
		{in: `""""`, err: true},
		{in: `"unterminated`, err: true},
		{in: `"ends in backslash\"`, err: true},
		{in: `'unterminated`, err: true},
		{in: `"a"b`, err: true},
		{in: `'a'b`, err: true},
		{in: "a b c d", want: []string{"a", "b", "c", "d"}},
		{in: "a b c d e", err: true},
	} {
		got, err := SplitArgs([]byte(tc.in), nil, 4)
		if (err != nil) != tc.err {
			t.Errorf("SplitArgs(%q) error = %v, want error %v", tc.in, err, tc.err)
			continue
		}
		if tc.err {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Errorf("SplitArgs(%q) error is %T, want *Error", tc.in, err)
			}
			continue
		}
		if gs := strs(got); !slices.Equal(gs, tc.want) {
			t.Errorf("SplitArgs(%q) = %q, want %q", tc.in, gs, tc.want)
		}
	}
}

func strs(b [][]byte) []string {
	var s []string
	for _, x := range b {
		s = append(s, string(x))
	}
	return s
}

// TestSplitArgsAliasing checks the documented ownership: plain words alias
// the line, quoted words are copies.
func TestSplitArgsAliasing(t *testing.T) {
	line := []byte(`plain "quoted"`)
	args, err := SplitArgs(line, nil, 10)
	if err != nil || len(args) != 2 {
		t.Fatalf("SplitArgs = %q, %v", args, err)
	}
	copy(line, "PLAIN  QUOTED ")
	if string(args[0]) != "PLAIN" {
		t.Errorf("plain word = %q after the line changed, want it to alias the line", args[0])
	}
	if string(args[1]) != "quoted" {
		t.Errorf("quoted word = %q after the line changed, want a copy", args[1])
	}
	// Appending to a plain word must not overwrite the rest of the line.
	_ = append(args[0], 'X')
	if line[5] != ' ' {
		t.Errorf("appending to a word wrote into the line: %q", line)
	}
}

// TestSplitArgsAppends checks that SplitArgs keeps the caller's arguments
// and counts them against maxArgs.
func TestSplitArgsAppends(t *testing.T) {
	args, err := SplitArgs([]byte("b c"), [][]byte{[]byte("a")}, 3)
	if err != nil || !slices.Equal(strs(args), []string{"a", "b", "c"}) {
		t.Fatalf("SplitArgs = %q, %v; want [a b c]", args, err)
	}
	if _, err := SplitArgs([]byte("b c d"), [][]byte{[]byte("a")}, 3); err == nil {
		t.Fatal("SplitArgs over maxArgs with existing args: no error")
	}
}

func TestParseInt(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"1", 1, true},
		{"-1", -1, true},
		{"42", 42, true},
		{"-42", -42, true},
		{"1000000", 1000000, true},
		{"9223372036854775807", 1<<63 - 1, true},
		{"-9223372036854775808", -1 << 63, true},
		{"9223372036854775808", 0, false},
		{"-9223372036854775809", 0, false},
		{"18446744073709551615", 0, false},
		{"18446744073709551616", 0, false},
		{"99999999999999999999", 0, false},
		{"-99999999999999999999", 0, false},
		{"123456789012345678901", 0, false},
		{"", 0, false},
		{"-", 0, false},
		{"+", 0, false},
		{"+1", 0, false},
		{"01", 0, false},
		{"00", 0, false},
		{"-0", 0, false},
		{"-01", 0, false},
		{" 1", 0, false},
		{"1 ", 0, false},
		{"1a", 0, false},
		{"a1", 0, false},
		{"--1", 0, false},
		{"1-", 0, false},
		{"1.0", 0, false},
		{"0x10", 0, false},
		{"١", 0, false}, // a non-ASCII digit
	} {
		got, ok := ParseInt([]byte(tc.in))
		if ok != tc.ok || got != tc.want {
			t.Errorf("ParseInt(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// TestParseIntAgreesWithStrconv checks ParseInt against strconv on random
// numbers and their neighbours at the limits: it accepts exactly the
// canonical spelling strconv.FormatInt produces.
func TestParseIntAgreesWithStrconv(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 20000; i++ {
		var n int64
		switch i % 4 {
		case 0:
			n = int64(rng.Uint64())
		case 1:
			n = rng.Int64N(2000) - 1000
		case 2:
			n = 1<<63 - 1 - rng.Int64N(100)
		case 3:
			n = -1<<63 + rng.Int64N(100)
		}
		s := strconv.FormatInt(n, 10)
		if got, ok := ParseInt([]byte(s)); !ok || got != n {
			t.Fatalf("ParseInt(%q) = %d, %v; want %d, true", s, got, ok, n)
		}
		for _, bad := range []string{"+" + s, " " + s, s + " ", "0" + s} {
			if _, ok := ParseInt([]byte(bad)); ok {
				t.Fatalf("ParseInt(%q) accepted a non-canonical number", bad)
			}
		}
	}
}

// TestShortLength checks header's fast path against its full one: on every
// string of up to 7 bytes drawn from some digits, the bytes either side of
// the digits ('/' and ':'), a sign and line ends, and on long numbers,
// wherever shortLength answers, length must accept the same number and end
// at the same offset, and reject it when it is over the limit.
func TestShortLength(t *testing.T) {
	inputs := []string{"999999999\r\n", "1000000000\r\n", "000000001\r\n", "123456789\r\n", "12345678\r\nx"}
	alphabet := "019/:-\r\n"
	var gen func(prefix string)
	gen = func(prefix string) {
		inputs = append(inputs, prefix)
		if len(prefix) == 7 {
			return
		}
		for i := range len(alphabet) {
			gen(prefix + alphabet[i:i+1])
		}
	}
	gen("")
	answered := 0
	for _, limit := range []int{15, DefaultLimits.MaxBulk} {
		p := NewParser(DefaultLimits)
		for _, in := range inputs {
			n, next, ok := shortLength([]byte(in), 0)
			if !ok {
				continue
			}
			answered++
			wantN, wantNext, err := p.length([]byte(in), 0, limit, "bulk")
			switch {
			case n > limit && err == nil:
				t.Fatalf("%q with limit %d: shortLength gave %d, length accepted it", in, limit, n)
			case n <= limit && (err != nil || n != wantN || next != wantNext):
				t.Fatalf("%q with limit %d: shortLength gave %d, %d; length %d, %d, %v", in, limit, n, next, wantN, wantNext, err)
			}
		}
	}
	if answered == 0 {
		t.Fatal("shortLength answered nothing")
	}
}
