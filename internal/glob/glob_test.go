package glob

import "testing"

// TestMatch checks patterns against strings, with the answers
// redis-server 7.0 gives (PUBSUB CHANNELS and KEYS use the same matcher).
func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		nocase     bool
		want       bool
	}{
		{"*", "", false, false}, // as Redis: PUBSUB CHANNELS * leaves out the channel ""
		{"*", "anything", false, true},
		{"", "", false, true},
		{"", "a", false, false},
		{"a", "", false, false},
		{"h?llo", "hello", false, true},
		{"h?llo", "hllo", false, false},
		{"h*llo", "hllo", false, true},
		{"h*llo", "heeeello", false, true},
		{"h[ae]llo", "hallo", false, true},
		{"h[ae]llo", "hillo", false, false},
		{"h[^e]llo", "hallo", false, true},
		{"h[^e]llo", "hello", false, false},
		{"h[a-b]llo", "hbllo", false, true},
		{"h[b-a]llo", "hbllo", false, true}, // a range either way round
		{"h[a-b]llo", "hcllo", false, false},
		{`h\*llo`, "h*llo", false, true},
		{`h\*llo`, "hallo", false, false},
		{`[\]]`, "]", false, true},
		{"a[", "a", false, false},
		{"a[b", "ab", false, true}, // an unclosed class lists the bytes to the end
		{"a[bc", "ac", false, true},
		{"a[", "ab", false, false},
		{"a*", "a", false, true},
		{"a**", "a", false, true},
		{"a*b*", "ab", false, true},
		{"*a", "ba", false, true},
		{"*a*b", "xaxxb", false, true},
		{"*a*b", "xaxxbc", false, false},
		{"a\\", "a\\", false, true},
		{"HELLO", "hello", true, true},
		{"HELLO", "hello", false, false},
		{"h[A-Z]llo", "hello", true, true},
		{"h[E]llo", "hello", true, true},
		{"[\x80-\xff]", "\x90", false, true},
		{"[a-\xff]", "b", false, false}, // ends compare as signed bytes: \xff is -1
	} {
		if got := Match([]byte(tc.pattern), []byte(tc.s), tc.nocase); got != tc.want {
			t.Errorf("Match(%q, %q, %v) = %v, want %v", tc.pattern, tc.s, tc.nocase, got, tc.want)
		}
	}
}

// TestMatchNesting checks that a pattern of many stars gives up rather than
// taking exponential time, as Redis's does.
func TestMatchNesting(t *testing.T) {
	p := make([]byte, 0, 4002)
	for range 2000 {
		p = append(p, '*', 'a')
	}
	s := make([]byte, 3000)
	for i := range s {
		s[i] = 'a'
	}
	if Match(p, s, false) {
		t.Fatal("a pattern nested past 1,000 stars matched")
	}
}
