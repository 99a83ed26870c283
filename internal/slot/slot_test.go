package slot

import "testing"

// The vectors are Redis's: CRC16 of "123456789" is 0x31C3 (the check value
// of CRC-16/XMODEM), and CLUSTER KEYSLOT's answers.
func TestOf(t *testing.T) {
	if got := CRC16([]byte("123456789")); got != 0x31C3 {
		t.Fatalf("CRC16(123456789) = %#x, want 0x31c3", got)
	}
	for _, tc := range []struct {
		key  string
		want int
	}{
		{"somekey", 11058},
		{"foo{hash_tag}", 2515},
		{"hash_tag", 2515},
		{"{user1000}.following", Of([]byte("user1000"))},
		{"foo{}{bar}", Of([]byte("foo{}{bar}"))}, // an empty first tag: the whole key
		{"foo{{bar}}zap", Of([]byte("{bar"))},    // the tag ends at the first "}"
		{"foo{bar}{zap}", Of([]byte("bar"))},     // only the first tag counts
		{"{", Of([]byte("{"))},
		{"", 0},
	} {
		if got := Of([]byte(tc.key)); got != tc.want {
			t.Errorf("Of(%q) = %d, want %d", tc.key, got, tc.want)
		}
	}
}
