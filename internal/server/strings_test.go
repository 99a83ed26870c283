package server

import (
	"bytes"
	"testing"
)

// FuzzSubstr checks GETRANGE's substr against a model that keeps each
// byte whose index is within the range: a negative bound counts from the
// end, and an end before the start of the value is its first byte (as in
// Redis 7.0: GETRANGE of "abc" 0 -100 is "a"), unless both bounds are
// negative and reversed.
func FuzzSubstr(f *testing.F) {
	f.Add([]byte("hello"), int64(1), int64(-2))
	f.Add([]byte(""), int64(0), int64(-1))
	f.Add([]byte("abc"), int64(-1), int64(-5))
	f.Add([]byte("abc"), int64(0), int64(-100))
	f.Add([]byte("abc"), int64(-9223372036854775808), int64(9223372036854775807))
	f.Fuzz(func(t *testing.T, v []byte, start, end int64) {
		n := int64(len(v))
		var want []byte
		for i := range n {
			fromStart := (start >= 0 && i >= start) || (start < 0 && i-n >= start)
			toEnd := (end >= 0 && i <= end) || (end < 0 && (i-n <= end || i == 0))
			if fromStart && toEnd && !(start < 0 && end < 0 && start > end) {
				want = append(want, v[i])
			}
		}
		if got := substr(v, start, end); !bytes.Equal(got, want) {
			t.Fatalf("substr(%q, %d, %d) = %q, model %q", v, start, end, got, want)
		}
	})
}
