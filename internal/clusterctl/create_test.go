package clusterctl

import (
	"strings"
	"testing"
)

// TestDistinct: create refuses a cluster with no group, a group with no
// member, and an address named twice, saying as what.
func TestDistinct(t *testing.T) {
	for _, tc := range []struct {
		managers []string
		groups   [][]string
		want     string
	}{
		{[]string{"m:1"}, [][]string{{"a:1"}, {"b:1"}}, ""},
		{[]string{"m:1"}, nil, "a cluster needs at least one data group"},
		{[]string{"m:1"}, [][]string{{"a:1"}, {}}, "group 2 has no member"},
		{[]string{"m:1", "m:1"}, [][]string{{"a:1"}}, "m:1 is named twice: as a manager and as a manager"},
		{[]string{"m:1"}, [][]string{{"a:1", "m:1"}}, "m:1 is named twice: as a manager and as a member of group 1"},
		{[]string{"m:1"}, [][]string{{"a:1"}, {"b:1", "a:1"}}, "a:1 is named twice: as a member of group 1 and as a member of group 2"},
	} {
		err := distinct(tc.managers, tc.groups)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.HasSuffix(err.Error(), tc.want)) {
			t.Errorf("distinct(%q, %q) = %v, want %q", tc.managers, tc.groups, err, tc.want)
		}
	}
}
