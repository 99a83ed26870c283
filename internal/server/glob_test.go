package server

import (
	"bytes"
	"testing"
)

// TestGlobMatch checks globMatch on patterns whose results redis-server
// 7.0.15 gave for KEYS.
func TestGlobMatch(t *testing.T) {
	cases := []struct {
		pat, str string
		want     bool
	}{
		{"*", "", false}, // KEYS * and SCAN MATCH * do not match, so take ""
		{"**", "", false},
		{"*", "anything", true},
		{"", "", true},
		{"", "a", false},
		{"a", "", false},
		{"h?llo", "hello", true},
		{"h?llo", "hllo", false},
		{"h*llo", "hllo", true},
		{"h*llo", "heeeello", true},
		{"h[ae]llo", "hallo", true},
		{"h[ae]llo", "hillo", false},
		{"h[^e]llo", "hallo", true},
		{"h[^e]llo", "hello", false},
		{"h[a-b]llo", "hbllo", true},
		{"h[b-a]llo", "hbllo", true}, // a range in either order
		{"h[a-b]llo", "hcllo", false},
		{`h\*llo`, "h*llo", true},
		{`h\*llo`, "hallo", false},
		{`h[\]]llo`, "h]llo", true},
		{`\`, `\`, true},
		{"a[", "a", false},
		{"a[", "ab", false},
		{"a[b", "ab", true}, // an unclosed class ends the pattern
		{"[", "x", false},
		{"**a**", "bab", true},
		{"*a*b", "xaxxb", true},
		{"*a*b", "xaxxc", false},
		{"[\x80-\xff]", "\x90", true},
		{"[\x01-\x80]", "\x90", true}, // bytes compare as signed chars: -128 to 1
		{"[\x01-\x80]", "\x10", false},
		{"?", "\xff", true},
	}
	for _, tc := range cases {
		if got := globMatch([]byte(tc.pat), []byte(tc.str)); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", tc.pat, tc.str, got, tc.want)
		}
	}
}

// TestGlobMatchBounded checks that a pattern of many stars against a long
// string that does not match ends (Redis's skip of longer matches).
func TestGlobMatchBounded(t *testing.T) {
	pat := append(bytes.Repeat([]byte("a*"), 40), 'b')
	if globMatch(pat, bytes.Repeat([]byte("a"), 10000)) {
		t.Fatal("matched")
	}
}

func TestMatcher(t *testing.T) {
	for _, tc := range []struct {
		pat  []byte
		key  string
		want bool
	}{
		{nil, "", true},
		{[]byte("*"), "", true},
		{[]byte("**"), "", false},
		{[]byte("a*"), "ab", true},
		{[]byte("a*"), "b", false},
	} {
		if got := matcher(tc.pat)(tc.key); got != tc.want {
			t.Errorf("matcher(%q)(%q) = %v, want %v", tc.pat, tc.key, got, tc.want)
		}
	}
}
