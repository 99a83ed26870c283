package clusterctl

import (
	"strings"
	"testing"

	"github.com/flintkv/flint/internal/shardmap"
)

// TestFindNode names a member by its client address across groups, or by
// id or address within a group, and refuses what the map lacks.
func TestFindNode(t *testing.T) {
	m, err := shardmap.Even([][]shardmap.Member{
		{{ID: 1, Addr: "127.0.0.1:7101"}, {ID: 2, Addr: "127.0.0.1:7102"}},
		{{ID: 1, Addr: "127.0.0.1:7201"}, {ID: 3, Addr: "127.0.0.1:7203"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		group       uint64
		node        string
		wantG, want uint64
		err         string
	}{
		{0, "127.0.0.1:7203", 2, 3, ""},
		{1, "2", 1, 2, ""},
		{2, "127.0.0.1:7201", 2, 1, ""},
		{0, "3", 0, 0, "no member at 3 in the map"},
		{1, "3", 0, 0, "group 1 has no member 3"},
		{1, "127.0.0.1:7203", 0, 0, "group 1 has no member 127.0.0.1:7203"},
		{5, "1", 0, 0, "no group 5 in the map"},
	} {
		g, id, err := findNode(m, tc.group, tc.node)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("findNode(%d, %q) = %v, want an error %q", tc.group, tc.node, err, tc.err)
		case tc.err == "" && (err != nil || g.ID != tc.wantG || id != tc.want):
			t.Errorf("findNode(%d, %q) = %v, %d, %v, want group %d member %d", tc.group, tc.node, g, id, err, tc.wantG, tc.want)
		}
	}
}
