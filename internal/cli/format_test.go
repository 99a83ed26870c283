package cli

import (
	"bytes"
	"math"
	"testing"

	"github.com/flintkv/flint/internal/protocol"
)

// Reply builders for the tables.

func str(k protocol.Kind, s string) protocol.Value { return protocol.Value{Kind: k, Str: []byte(s)} }
func simple(s string) protocol.Value               { return str(protocol.KindSimple, s) }
func bulk(s string) protocol.Value                 { return str(protocol.KindBulk, s) }
func errv(s string) protocol.Value                 { return str(protocol.KindError, s) }
func double(s string) protocol.Value               { return str(protocol.KindDouble, s) }
func integer(n int64) protocol.Value               { return protocol.Value{Kind: protocol.KindInt, Int: n} }
func boolean(b bool) protocol.Value {
	v := protocol.Value{Kind: protocol.KindBool}
	if b {
		v.Int = 1
	}
	return v
}
func agg(k protocol.Kind, elems ...protocol.Value) protocol.Value {
	return protocol.Value{Kind: k, Elems: append([]protocol.Value{}, elems...)}
}
func arr(elems ...protocol.Value) protocol.Value  { return agg(protocol.KindArray, elems...) }
func set(elems ...protocol.Value) protocol.Value  { return agg(protocol.KindSet, elems...) }
func mapv(elems ...protocol.Value) protocol.Value { return agg(protocol.KindMap, elems...) }

var null = protocol.Value{Kind: protocol.KindNull}

// The expected outputs are what redis-cli 7.0.15 printed for the same
// replies from redis-server 7.0.15 (EVAL and DEBUG PROTOCOL), to a
// terminal (tty) and to a pipe (raw).
var formatTests = []struct {
	name     string
	v        protocol.Value
	tty, raw string
}{
	{"simple", simple("OK"), "OK\n", "OK\n"},
	{"bulk", bulk("value"), `"value"` + "\n", "value\n"},
	{"empty bulk", bulk(""), `""` + "\n", "\n"},
	{"bulk with spaces", bulk("hello world"), `"hello world"` + "\n", "hello world\n"},
	{"binary bulk", bulk("a\x01b\"c\\d\te\xff\r\n\a\bz\x00y~\x7f"),
		`"a\x01b\"c\\d\te\xff\r\n\a\bz\x00y~\x7f"` + "\n",
		"a\x01b\"c\\d\te\xff\r\n\a\bz\x00y~\x7f\n"},
	{"integer", integer(12345), "(integer) 12345\n", "12345\n"},
	{"negative integer", integer(math.MinInt64), "(integer) -9223372036854775808\n", "-9223372036854775808\n"},
	{"nil", null, "(nil)\n", "\n"},
	{"error", errv("ERR unknown command 'foo'"), "(error) ERR unknown command 'foo'\n", "ERR unknown command 'foo'\n\n"},
	{"empty error", errv(""), "(error) \n", "\n\n"},
	{"double", double("3.141"), "(double) 3.141\n", "3.141\n"},
	{"infinite double", double("-inf"), "(double) -inf\n", "-inf\n"},
	{"true", boolean(true), "(true)\n", "(true)\n"},
	{"false", boolean(false), "(false)\n", "(false)\n"},
	{"verbatim", str(protocol.KindVerbat, "This is a verbatim\nstring"),
		"This is a verbatim\nstring\n", "This is a verbatim\nstring\n"},
	{"big number", str(protocol.KindBigNum, "1234567999999999999999999999999999999"),
		"(big number) 1234567999999999999999999999999999999\n", "1234567999999999999999999999999999999\n"},

	{"empty array", arr(), "(empty array)\n", "\n"},
	{"empty set", set(), "(empty set)\n", "\n"},
	{"empty map", mapv(), "(empty hash)\n", "\n"},
	{"empty push", agg(protocol.KindPush), "(empty push)\n", "\n"},
	{"array", arr(integer(0), integer(1), integer(2)),
		"1) (integer) 0\n2) (integer) 1\n3) (integer) 2\n", "0\n1\n2\n"},
	{"array of nils", arr(null, null), "1) (nil)\n2) (nil)\n", "\n\n"},
	{"push", agg(protocol.KindPush, bulk("server-cpu-usage"), integer(42)),
		"1) \"server-cpu-usage\"\n2) (integer) 42\n", "server-cpu-usage\n42\n"},
	{"set", set(integer(0), integer(1), integer(2)),
		"1~ (integer) 0\n2~ (integer) 1\n3~ (integer) 2\n", "0\n1\n2\n"},
	{"nested arrays", arr(integer(1), arr(integer(2), bulk("a"), arr(), arr(bulk("x"), arr(bulk("y")))),
		arr(), bulk("q"), simple("OK"), errv("E bad"), null),
		`1) (integer) 1
2) 1) (integer) 2
   2) "a"
   3) (empty array)
   4) 1) "x"
      2) 1) "y"
3) (empty array)
4) "q"
5) OK
6) (error) E bad
7) (nil)
`, "1\n2\na\n\nx\ny\n\nq\nOK\nE bad\n\n\n"},
	{"index width", arr(arr(integer(1), bulk("v")), arr(integer(2), bulk("v")), arr(integer(3), bulk("v")),
		arr(integer(4), bulk("v")), arr(integer(5), bulk("v")), arr(integer(6), bulk("v")),
		arr(integer(7), bulk("v")), arr(integer(8), bulk("v")), arr(integer(9), bulk("v")),
		arr(integer(10), bulk("v")), arr(integer(11), bulk("v"))),
		` 1) 1) (integer) 1
    2) "v"
 2) 1) (integer) 2
    2) "v"
 3) 1) (integer) 3
    2) "v"
 4) 1) (integer) 4
    2) "v"
 5) 1) (integer) 5
    2) "v"
 6) 1) (integer) 6
    2) "v"
 7) 1) (integer) 7
    2) "v"
 8) 1) (integer) 8
    2) "v"
 9) 1) (integer) 9
    2) "v"
10) 1) (integer) 10
    2) "v"
11) 1) (integer) 11
    2) "v"
`, "1\nv\n2\nv\n3\nv\n4\nv\n5\nv\n6\nv\n7\nv\n8\nv\n9\nv\n10\nv\n11\nv\n"},
	{"map", mapv(integer(0), boolean(false), integer(1), boolean(true), integer(2), boolean(false)),
		"1# (integer) 0 => (false)\n2# (integer) 1 => (true)\n3# (integer) 2 => (false)\n",
		"0 (false)\n1 (true)\n2 (false)\n"},
	{"map with aggregate values", mapv(
		bulk("a"), arr(integer(1), integer(2)),
		bulk("c"), mapv(bulk("x"), bulk("y")),
		bulk("b"), mapv()),
		`1# "a" => 
   1) (integer) 1
   2) (integer) 2
2# "c" => 1# "x" => "y"
3# "b" => (empty hash)
`, "a 1\n2\nc x y\nb \n"},
	{"map values one line or many", mapv(
		bulk("a"), mapv(bulk("x"), arr(integer(1))),
		bulk("d"), arr(arr(arr(integer(1), integer(2)))),
		bulk("c"), arr(arr(arr(integer(1)))),
		bulk("b"), mapv(bulk("x"), arr(integer(1), integer(2)))),
		`1# "a" => 1# "x" => 1) (integer) 1
2# "d" => 
   1) 1) 1) (integer) 1
         2) (integer) 2
3# "c" => 1) 1) 1) (integer) 1
4# "b" => 
   1# "x" => 
      1) (integer) 1
      2) (integer) 2
`, "a x 1\nd 1\n2\nc 1\nb x 1\n2\n"},
	{"aggregate keys", mapv(integer(1), mapv(integer(2), set(integer(1)))),
		"1# (integer) 1 => 1# (integer) 2 => 1~ (integer) 1\n", "1 2 1\n"},
	{"array in set in array", arr(set(bulk("a")), arr(), boolean(true), boolean(false), mapv(), set()),
		"1) 1~ \"a\"\n2) (empty array)\n3) (true)\n4) (false)\n5) (empty hash)\n6) (empty set)\n",
		"a\n\n(true)\n(false)\n\n\n"},
	{"map key spanning lines", mapv(arr(bulk("k1"), bulk("k2")), bulk("v")),
		"1# 1) \"k1\"\n   2) \"k2\" => \"v\"\n", "k1\nk2 v\n"},
}

func TestFormat(t *testing.T) {
	for _, tt := range formatTests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(appendTTY(nil, tt.v, "")); got != tt.tty {
				t.Errorf("formatted:\n got %q\nwant %q", got, tt.tty)
			}
			if got := string(append(appendRaw(nil, tt.v), '\n')); got != tt.raw {
				t.Errorf("raw:\n got %q\nwant %q", got, tt.raw)
			}
		})
	}
}

// TestReprReadsBack checks that every byte survives being printed quoted
// and read back as a command argument: a formatted value can be pasted.
func TestReprReadsBack(t *testing.T) {
	var all []byte
	for c := range 256 {
		all = append(all, byte(c))
	}
	for _, s := range [][]byte{all, {}, []byte(`\x41`), []byte(`"'`)} {
		line := appendRepr([]byte("set "), s)
		args, err := protocol.SplitArgs(line, nil, 3)
		if err != nil || len(args) != 2 || !bytes.Equal(args[1], s) {
			t.Errorf("SplitArgs(%q) = %q, %v; want [set %q]", line, args, err, s)
		}
	}
}
