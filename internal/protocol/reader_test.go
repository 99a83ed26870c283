package protocol

import (
	"bufio"
	"errors"
	"io"
	"math/rand/v2"
	"runtime/debug"
	"strings"
	"testing"
)

// Shorthands for expected values.
func simple(s string) Value        { return Value{Kind: KindSimple, Str: []byte(s)} }
func bulk(s string) Value          { return Value{Kind: KindBulk, Str: []byte(s)} }
func integer(n int64) Value        { return Value{Kind: KindInt, Int: n} }
func errv(s string) Value          { return Value{Kind: KindError, Str: []byte(s)} }
func agg(k Kind, e ...Value) Value { return Value{Kind: k, Elems: e} }

var null = Value{Kind: KindNull}

// sameValue compares values by meaning: nil and empty byte slices and
// element lists are equal.
func sameValue(a, b Value) bool {
	if a.Kind != b.Kind || a.Int != b.Int || string(a.Str) != string(b.Str) || len(a.Elems) != len(b.Elems) {
		return false
	}
	for i := range a.Elems {
		if !sameValue(a.Elems[i], b.Elems[i]) {
			return false
		}
	}
	return true
}

// testLimits are low enough for tests to cross.
var testLimits = ReaderLimits{MaxBulk: 32, MaxElems: 4, MaxDepth: 3}

func newTestReader(s string, lim ReaderLimits) *Reader {
	// 16 bytes is bufio's smallest buffer: long lines cross it.
	return NewReader(bufio.NewReaderSize(strings.NewReader(s), 16), lim)
}

func TestReader(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want Value
	}{
		{"simple", "+OK\r\n", simple("OK")},
		{"simple empty", "+\r\n", simple("")},
		{"simple longer than the buffer", "+" + strings.Repeat("x", 28) + "\r\n", simple(strings.Repeat("x", 28))},
		{"error", "-ERR bad\r\n", errv("ERR bad")},
		{"int", ":42\r\n", integer(42)},
		{"int negative", ":-42\r\n", integer(-42)},
		{"int max", ":9223372036854775807\r\n", integer(1<<63 - 1)},
		{"int min", ":-9223372036854775808\r\n", integer(-1 << 63)},
		{"bulk", "$5\r\nhello\r\n", bulk("hello")},
		{"bulk empty", "$0\r\n\r\n", bulk("")},
		{"bulk binary", "$4\r\n\r\n\x00\n\r\n", bulk("\r\n\x00\n")},
		{"bulk at MaxBulk", "$32\r\n" + strings.Repeat("b", 32) + "\r\n", bulk(strings.Repeat("b", 32))},
		{"null bulk RESP2", "$-1\r\n", null},
		{"null array RESP2", "*-1\r\n", null},
		{"null RESP3", "_\r\n", null},
		{"double", ",3.14\r\n", Value{Kind: KindDouble, Str: []byte("3.14")}},
		{"double inf", ",-inf\r\n", Value{Kind: KindDouble, Str: []byte("-inf")}},
		{"true", "#t\r\n", Value{Kind: KindBool, Int: 1}},
		{"false", "#f\r\n", Value{Kind: KindBool, Int: 0}},
		{"big number", "(3492890328409238509324850943\r\n", Value{Kind: KindBigNum, Str: []byte("3492890328409238509324850943")}},
		{"verbatim", "=15\r\ntxt:hello world\r\n", Value{Kind: KindVerbat, Str: []byte("hello world")}},
		{"verbatim markdown", "=6\r\nmkd:**\r\n", Value{Kind: KindVerbat, Str: []byte("**")}},
		{"verbatim empty", "=4\r\ntxt:\r\n", Value{Kind: KindVerbat, Str: []byte("")}},
		{"bulk error", "!21\r\nSYNTAX invalid syntax\r\n", errv("SYNTAX invalid syntax")},
		{"array", "*2\r\n$3\r\nfoo\r\n:1\r\n", agg(KindArray, bulk("foo"), integer(1))},
		{"array empty", "*0\r\n", agg(KindArray)},
		{"array with null", "*3\r\n$1\r\na\r\n$-1\r\n_\r\n", agg(KindArray, bulk("a"), null, null)},
		{"set", "~2\r\n+a\r\n+b\r\n", agg(KindSet, simple("a"), simple("b"))},
		{"push", ">2\r\n+message\r\n$2\r\nhi\r\n", agg(KindPush, simple("message"), bulk("hi"))},
		{"map", "%2\r\n+a\r\n:1\r\n+b\r\n:2\r\n", agg(KindMap, simple("a"), integer(1), simple("b"), integer(2))},
		{"null map", "%-1\r\n", null},
		{"nested", "*2\r\n*1\r\n:1\r\n%1\r\n+k\r\n*0\r\n",
			agg(KindArray, agg(KindArray, integer(1)), agg(KindMap, simple("k"), agg(KindArray)))},
		{"attribute before reply", "|1\r\n+key-popularity\r\n%1\r\n$1\r\na\r\n,0.19\r\n:7\r\n", integer(7)},
		{"attribute inside array", "*2\r\n:1\r\n|1\r\n+ttl\r\n:3600\r\n:2\r\n", agg(KindArray, integer(1), integer(2))},
		{"attributes in a row", "|0\r\n|1\r\n+a\r\n+b\r\n+OK\r\n", simple("OK")},
		{"at MaxDepth", "*1\r\n*1\r\n*1\r\n:1\r\n", agg(KindArray, agg(KindArray, agg(KindArray, integer(1))))},
		{"at MaxElems", "*4\r\n:1\r\n:2\r\n:3\r\n:4\r\n", agg(KindArray, integer(1), integer(2), integer(3), integer(4))},
		{"map at MaxElems pairs", "%4\r\n:1\r\n:1\r\n:2\r\n:2\r\n:3\r\n:3\r\n:4\r\n:4\r\n",
			agg(KindMap, integer(1), integer(1), integer(2), integer(2), integer(3), integer(3), integer(4), integer(4))},
	} {
		rd := newTestReader(tc.in, testLimits)
		got, err := rd.Read()
		if err != nil {
			t.Errorf("%s: Read(%q) error: %v", tc.name, tc.in, err)
			continue
		}
		if !sameValue(got, tc.want) {
			t.Errorf("%s: Read(%q) = %+v, want %+v", tc.name, tc.in, got, tc.want)
		}
		// The whole reply was consumed: what follows is a clean end.
		if v, err := rd.Read(); err != io.EOF {
			t.Errorf("%s: Read after the reply = %v, %v; want io.EOF", tc.name, v, err)
		}
	}
}

func TestReaderBadReply(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
	}{
		{"unknown type byte", "?\r\n"},
		{"empty line", "\r\n"},
		{"LF without CR", "+OK\n"},
		{"lone LF", "\n"},
		{"line too long", "+" + strings.Repeat("x", 40) + "\r\n"},
		{"bad int", ":abc\r\n"},
		{"int with plus", ":+1\r\n"},
		{"int empty", ":\r\n"},
		{"int overflow", ":9223372036854775808\r\n"},
		{"bad bool", "#x\r\n"},
		{"bool too long", "#tt\r\n"},
		{"bool empty", "#\r\n"},
		{"bulk bad length", "$x\r\n"},
		{"bulk empty length", "$\r\n"},
		{"bulk length -2", "$-2\r\n"},
		{"bulk zero-padded length", "$01\r\nx\r\n"},
		{"bulk over MaxBulk", "$33\r\n"},
		{"bulk without CRLF", "$3\r\nfooXY"},
		{"bulk longer than length", "$2\r\nfoo\r\n"},
		{"verbatim too short", "=3\r\ntxt\r\n"},
		{"verbatim without colon", "=5\r\ntxtab\r\n"},
		{"bulk error over MaxBulk", "!33\r\n"},
		{"aggregate bad length", "*x\r\n"},
		{"aggregate length -2", "*-2\r\n"},
		{"aggregate over MaxElems", "*5\r\n"},
		{"map over MaxElems", "%5\r\n"},
		{"bad element", "*2\r\n:1\r\n?\r\n"},
		{"over MaxDepth", "*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n"},
		{"over MaxDepth mixed kinds", "%1\r\n+k\r\n~1\r\n>1\r\n*1\r\n_\r\n"},
		{"over MaxDepth in attribute", "|1\r\n+a\r\n*1\r\n*1\r\n*1\r\n:1\r\n+OK\r\n"},
	} {
		_, err := newTestReader(tc.in, testLimits).Read()
		if !errors.Is(err, ErrBadReply) {
			t.Errorf("%s: Read(%q) error = %v, want ErrBadReply", tc.name, tc.in, err)
		}
	}
}

func TestReaderEOF(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want error
	}{
		{"nothing", "", io.EOF},
		{"partial line", "+OK", io.ErrUnexpectedEOF},
		{"CR without LF", "+OK\r", io.ErrUnexpectedEOF},
		{"bulk without body", "$5\r\n", io.ErrUnexpectedEOF},
		{"partial bulk", "$5\r\nhel", io.ErrUnexpectedEOF},
		{"bulk without CRLF", "$5\r\nhello", io.ErrUnexpectedEOF},
		{"array without elements", "*2\r\n", io.ErrUnexpectedEOF},
		{"array missing an element", "*2\r\n:1\r\n", io.ErrUnexpectedEOF},
		{"nested array missing an element", "*1\r\n*2\r\n:1\r\n", io.ErrUnexpectedEOF},
		{"map missing a value", "%1\r\n+k\r\n", io.ErrUnexpectedEOF},
		{"attribute without reply", "|1\r\n+a\r\n+b\r\n", io.ErrUnexpectedEOF},
		{"partial attribute", "|1\r\n+a\r\n", io.ErrUnexpectedEOF},
	} {
		_, err := newTestReader(tc.in, testLimits).Read()
		if err != tc.want {
			t.Errorf("%s: Read(%q) error = %v, want %v", tc.name, tc.in, err, tc.want)
		}
	}
}

// TestReaderStream reads several replies from one stream, then its end.
func TestReaderStream(t *testing.T) {
	rd := newTestReader("+OK\r\n:1\r\n$3\r\nfoo\r\n*1\r\n_\r\n", testLimits)
	for _, want := range []Value{simple("OK"), integer(1), bulk("foo"), agg(KindArray, null)} {
		got, err := rd.Read()
		if err != nil || !sameValue(got, want) {
			t.Fatalf("Read = %v, %v; want %v", got, err, want)
		}
	}
	for range 2 {
		if _, err := rd.Read(); err != io.EOF {
			t.Fatalf("Read at the end = %v, want io.EOF", err)
		}
	}
}

// TestReaderIOError checks that an I/O error is returned as it is.
func TestReaderIOError(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader("*2\r\n:1\r\n"), errReader{boom})
	_, err := NewReader(bufio.NewReader(r), testLimits).Read()
	if err != boom {
		t.Fatalf("Read error = %v, want %v", err, boom)
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// TestReaderAttributeRun checks that a long run of attributes is read in
// constant stack: each is dropped before the next is read.
func TestReaderAttributeRun(t *testing.T) {
	const n = 200000 // far more than 16 MB of stack if each attribute recursed
	defer debug.SetMaxStack(debug.SetMaxStack(16 << 20))
	in := strings.Repeat("|0\r\n", n) + ":1\r\n"
	got, err := NewReader(bufio.NewReader(strings.NewReader(in)), DefaultReaderLimits).Read()
	if err != nil || !sameValue(got, integer(1)) {
		t.Fatalf("Read = %v, %v; want 1", got, err)
	}
}

// TestReaderValuesAreCopies checks that a Value does not alias the Reader's
// buffer: reading the next reply does not change it.
func TestReaderValuesAreCopies(t *testing.T) {
	rd := newTestReader("+first\r\n$6\r\nsecond\r\n+third\r\n$6\r\nfourth\r\n", testLimits)
	var got []Value
	for range 4 {
		v, err := rd.Read()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	want := []Value{simple("first"), bulk("second"), simple("third"), bulk("fourth")}
	for i := range want {
		if !sameValue(got[i], want[i]) {
			t.Errorf("reply %d = %v after later reads, want %v", i, got[i], want[i])
		}
	}
}

func TestValueString(t *testing.T) {
	for _, tc := range []struct {
		v    Value
		want string
	}{
		{integer(-3), "-3"},
		{Value{Kind: KindBool, Int: 1}, "1"},
		{null, "(nil)"},
		{bulk("a b"), `"a b"`},
		{errv("ERR x"), "(error) ERR x"},
		{agg(KindArray, integer(1), bulk("x"), agg(KindMap, simple("k"), null)), `[1 "x" ["k" (nil)]]`},
	} {
		if got := tc.v.String(); got != tc.want {
			t.Errorf("String() = %s, want %s", got, tc.want)
		}
	}
	if !errv("x").IsError() || !(Value{Kind: KindBulkErr}).IsError() || simple("x").IsError() {
		t.Error("IsError is wrong")
	}
}

// TestRoundTrip encodes replies with the Append functions and decodes them
// with Reader, in both protocol versions.
func TestRoundTrip(t *testing.T) {
	for _, v := range []Version{RESP2, RESP3} {
		var b []byte
		var want []Value
		add := func(enc []byte, val Value) { b, want = enc, append(want, val) }

		add(AppendOK(b), simple("OK"))
		add(AppendSimple(b, "PONG"), simple("PONG"))
		add(AppendError(b, "ERR one\r\ntwo"), errv("ERR one  two"))
		add(AppendInt(b, -1<<63), integer(-1<<63))
		add(AppendInt(b, 1<<63-1), integer(1<<63-1))
		add(AppendBulk(b, []byte("a\r\nb")), bulk("a\r\nb"))
		add(AppendBulkString(b, ""), bulk(""))
		add(append(AppendBulkHeader(b, 3), "abc\r\n"...), bulk("abc"))
		add(AppendNull(b, v), null)
		add(AppendNullArray(b, v), null)
		add(AppendCommand(b, []byte("GET"), []byte("k")), agg(KindArray, bulk("GET"), bulk("k")))

		enc := AppendMap(b, 2, v)
		enc = AppendBulkString(enc, "a")
		enc = AppendInt(enc, 1)
		enc = AppendBulkString(enc, "b")
		enc = AppendNull(enc, v)
		mapKind, setKind, verbatim := KindMap, KindSet, Value{Kind: KindVerbat, Str: []byte("some text")}
		if v == RESP2 {
			mapKind, setKind, verbatim = KindArray, KindArray, bulk("some text")
		}
		add(enc, agg(mapKind, bulk("a"), integer(1), bulk("b"), null))

		enc = AppendSet(b, 2, v)
		enc = AppendArray(enc, 0)
		enc = AppendVerbatim(enc, "x", v)
		x := Value{Kind: verbatim.Kind, Str: []byte("x")}
		add(enc, agg(setKind, agg(KindArray), x))
		add(AppendVerbatim(b, "some text", v), verbatim)

		rd := NewReader(bufio.NewReader(strings.NewReader(string(b))), DefaultReaderLimits)
		for i, w := range want {
			got, err := rd.Read()
			if err != nil || !sameValue(got, w) {
				t.Fatalf("RESP%d reply %d: Read = %v, %v; want %v", v, i, got, err, w)
			}
		}
		if _, err := rd.Read(); err != io.EOF {
			t.Fatalf("RESP%d: Read at the end = %v, want io.EOF", v, err)
		}
	}
}

// TestRoundTripRandom round-trips random nested replies.
func TestRoundTripRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 500; i++ {
		want := randomValue(rng, 0)
		b := appendValue(nil, want)
		got, err := NewReader(bufio.NewReaderSize(strings.NewReader(string(b)), 16), DefaultReaderLimits).Read()
		if err != nil || !sameValue(got, want) {
			t.Fatalf("encoded %v as %q, read back %v, %v", want, b, got, err)
		}
	}
}

func randomValue(rng *rand.Rand, depth int) Value {
	kinds := []Kind{KindInt, KindBulk, KindNull, KindSimple, KindArray, KindMap}
	if depth >= 3 {
		kinds = kinds[:4]
	}
	switch k := kinds[rng.IntN(len(kinds))]; k {
	case KindInt:
		return integer(int64(rng.Uint64()) >> rng.IntN(64))
	case KindBulk:
		s := make([]byte, rng.IntN(40))
		for i := range s {
			s[i] = byte(rng.IntN(256))
		}
		return bulk(string(s))
	case KindNull:
		return null
	case KindSimple:
		return simple(strings.Repeat("ab ", rng.IntN(10)))
	default:
		n := rng.IntN(4)
		if k == KindMap {
			n *= 2
		}
		v := Value{Kind: k}
		for range n {
			v.Elems = append(v.Elems, randomValue(rng, depth+1))
		}
		return v
	}
}

// appendValue encodes v in RESP3 with the Append functions.
func appendValue(b []byte, v Value) []byte {
	switch v.Kind {
	case KindInt:
		return AppendInt(b, v.Int)
	case KindBulk:
		return AppendBulk(b, v.Str)
	case KindNull:
		return AppendNull(b, RESP3)
	case KindSimple:
		return AppendSimple(b, string(v.Str))
	case KindMap:
		b = AppendMap(b, len(v.Elems)/2, RESP3)
	default:
		b = AppendArray(b, len(v.Elems))
	}
	for _, e := range v.Elems {
		b = appendValue(b, e)
	}
	return b
}
