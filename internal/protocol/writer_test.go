package protocol

import (
	"strings"
	"testing"
)

func TestAppend(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"simple", AppendSimple(nil, "PONG"), "+PONG\r\n"},
		{"simple empty", AppendSimple(nil, ""), "+\r\n"},
		{"ok", AppendOK(nil), "+OK\r\n"},
		{"error", AppendError(nil, "ERR unknown command"), "-ERR unknown command\r\n"},
		{"error with CR LF", AppendError(nil, "ERR a\r\nb\nc\rd"), "-ERR a  b c d\r\n"},
		{"int", AppendInt(nil, 42), ":42\r\n"},
		{"int zero", AppendInt(nil, 0), ":0\r\n"},
		{"int negative", AppendInt(nil, -7), ":-7\r\n"},
		{"int max", AppendInt(nil, 1<<63-1), ":9223372036854775807\r\n"},
		{"int min", AppendInt(nil, -1<<63), ":-9223372036854775808\r\n"},
		{"bulk", AppendBulk(nil, []byte("hello")), "$5\r\nhello\r\n"},
		{"bulk binary", AppendBulk(nil, []byte("a\r\n\x00")), "$4\r\na\r\n\x00\r\n"},
		{"bulk empty", AppendBulk(nil, nil), "$0\r\n\r\n"},
		{"bulk string", AppendBulkString(nil, "hello"), "$5\r\nhello\r\n"},
		{"bulk string empty", AppendBulkString(nil, ""), "$0\r\n\r\n"},
		{"bulk header", AppendBulkHeader(nil, 1000), "$1000\r\n"},
		{"null RESP2", AppendNull(nil, RESP2), "$-1\r\n"},
		{"null RESP3", AppendNull(nil, RESP3), "_\r\n"},
		{"null array RESP2", AppendNullArray(nil, RESP2), "*-1\r\n"},
		{"null array RESP3", AppendNullArray(nil, RESP3), "_\r\n"},
		{"array", AppendArray(nil, 3), "*3\r\n"},
		{"array empty", AppendArray(nil, 0), "*0\r\n"},
		{"map RESP2", AppendMap(nil, 2, RESP2), "*4\r\n"},
		{"map RESP3", AppendMap(nil, 2, RESP3), "%2\r\n"},
		{"map empty RESP2", AppendMap(nil, 0, RESP2), "*0\r\n"},
		{"set RESP2", AppendSet(nil, 2, RESP2), "*2\r\n"},
		{"set RESP3", AppendSet(nil, 2, RESP3), "~2\r\n"},
		{"verbatim RESP2", AppendVerbatim(nil, "hello world", RESP2), "$11\r\nhello world\r\n"},
		{"verbatim RESP3", AppendVerbatim(nil, "hello world", RESP3), "=15\r\ntxt:hello world\r\n"},
		{"verbatim RESP3 empty", AppendVerbatim(nil, "", RESP3), "=4\r\ntxt:\r\n"},
		{"command", AppendCommand(nil, []byte("SET"), []byte("k"), []byte("")), "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n"},
		{"command no args", AppendCommand(nil), "*0\r\n"},
		{"appends after prefix", AppendInt([]byte("+OK\r\n"), 1), "+OK\r\n:1\r\n"},
	} {
		if string(tc.got) != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}

// TestAppendKeepsPrefix checks that every encoder appends and leaves the
// bytes already in the buffer alone.
func TestAppendKeepsPrefix(t *testing.T) {
	const prefix = "prefix"
	for name, f := range appenders() {
		for _, v := range []Version{RESP2, RESP3} {
			b := f([]byte(prefix), v)
			if !strings.HasPrefix(string(b), prefix) || len(b) == len(prefix) {
				t.Errorf("%s RESP%d: got %q, want %q followed by the encoding", name, v, b, prefix)
			}
			if alone := f(nil, v); string(b[len(prefix):]) != string(alone) {
				t.Errorf("%s RESP%d: after a prefix got %q, alone %q", name, v, b[len(prefix):], alone)
			}
		}
	}
}

// TestAppendAllocs checks the promise that the encoders allocate nothing
// when the buffer has room.
func TestAppendAllocs(t *testing.T) {
	buf := make([]byte, 0, 256)
	for name, f := range appenders() {
		for _, v := range []Version{RESP2, RESP3} {
			if n := testing.AllocsPerRun(100, func() { buf = f(buf[:0], v) }); n != 0 {
				t.Errorf("%s RESP%d: %v allocations per call, want 0", name, v, n)
			}
		}
	}
}

func appenders() map[string]func([]byte, Version) []byte {
	val := []byte("value")
	return map[string]func([]byte, Version) []byte{
		"simple":       func(b []byte, _ Version) []byte { return AppendSimple(b, "OK") },
		"ok":           func(b []byte, _ Version) []byte { return AppendOK(b) },
		"error":        func(b []byte, _ Version) []byte { return AppendError(b, "ERR x\r\ny") },
		"int":          func(b []byte, _ Version) []byte { return AppendInt(b, -1<<63) },
		"bulk":         func(b []byte, _ Version) []byte { return AppendBulk(b, val) },
		"bulk string":  func(b []byte, _ Version) []byte { return AppendBulkString(b, "value") },
		"bulk header":  func(b []byte, _ Version) []byte { return AppendBulkHeader(b, 12345) },
		"null":         AppendNull,
		"null array":   AppendNullArray,
		"array":        func(b []byte, _ Version) []byte { return AppendArray(b, 7) },
		"map":          func(b []byte, v Version) []byte { return AppendMap(b, 7, v) },
		"set":          func(b []byte, v Version) []byte { return AppendSet(b, 7, v) },
		"verbatim":     func(b []byte, v Version) []byte { return AppendVerbatim(b, "some text", v) },
		"command":      func(b []byte, _ Version) []byte { return AppendCommand(b, val, val) },
		"empty bulk":   func(b []byte, _ Version) []byte { return AppendBulk(b, nil) },
		"large length": func(b []byte, _ Version) []byte { return AppendArray(b, 1<<40) },
	}
}
