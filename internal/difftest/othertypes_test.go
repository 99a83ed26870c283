package difftest

import (
	"bytes"
	"testing"

	"github.com/flintkv/flint/internal/protocol"
)

// TestOtherTypesRefused checks that Flint refuses every command Redis 7
// has for the other data types, each with the same reply: Redis lists
// them by their ACL categories.
func TestOtherTypesRefused(t *testing.T) {
	rc := newConn(t, startRedis(t))
	defer rc.Close()
	fc := newConn(t, tcp(startFlint(t)))
	defer fc.Close()
	seen := map[string]bool{}
	for _, cat := range []string{"list", "hash", "set", "sortedset", "stream", "hyperloglog", "geo"} {
		v, _, err := rc.do(bytes.Fields([]byte("COMMAND LIST FILTERBY ACLCAT " + cat)))
		if err != nil || v.Kind != protocol.KindArray || len(v.Elems) == 0 {
			t.Fatalf("COMMAND LIST FILTERBY ACLCAT %s: %s, %v", cat, v, err)
		}
		for _, e := range v.Elems {
			name, _, _ := bytes.Cut(e.Str, []byte("|")) // xgroup|create is a subcommand of xgroup
			if seen[string(name)] {
				continue
			}
			seen[string(name)] = true
			want := "-ERR '" + string(name) + "' is not supported: Flint stores only string values\r\n"
			if _, got, err := fc.do([][]byte{name}); err != nil || string(got) != want {
				t.Errorf("%s (@%s): %q, %v; want %q", name, cat, got, err, want)
			}
		}
	}
}
