package clusterctl

import (
	"errors"
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

// TestOneMetaGroup: create takes one in-memory manager, or every member
// of one meta group; it refuses an in-memory manager among others, a
// subset of a group, a manager of another group, and managers that do
// not agree on a leader (errUnsettled, which it asks again about).
func TestOneMetaGroup(t *testing.T) {
	memory := map[string]string{"role": "master", "flint_member": "1", "flint_leader": "1", "flint_members": "1", "flint_term": "0"}
	leader := map[string]string{"role": "master", "flint_member": "1", "flint_leader": "1", "flint_members": "3",
		"slave0": "ip=127.0.0.1,port=7002,state=online,offset=5,lag=0,member=2,voter=1,lost=0",
		"slave1": "ip=127.0.0.1,port=7003,state=online,offset=5,lag=0,member=3,voter=1,lost=0"}
	follower := func(id, lead string) map[string]string {
		return map[string]string{"role": "slave", "flint_member": id, "flint_leader": lead, "flint_members": "3",
			"master_host": "127.0.0.1", "master_port": "700" + lead}
	}
	other := map[string]string{"role": "master", "flint_member": "1", "flint_leader": "1", "flint_members": "2",
		"slave0": "ip=127.0.0.1,port=9002,state=online,offset=5,lag=0,member=2,voter=1,lost=0"}
	three := []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"}
	for _, tc := range []struct {
		addrs    []string
		infos    []map[string]string
		want     string // the error's start, "" for none
		unsettle bool
	}{
		{[]string{"m:1"}, []map[string]string{memory}, "", false},
		{three, []map[string]string{leader, follower("2", "1"), follower("3", "1")}, "", false},
		{[]string{"m:1", "m:2"}, []map[string]string{other, memory},
			"clusterctl: the manager at m:2 is the one member of its meta group", false},
		{three[:2], []map[string]string{leader, follower("2", "1")},
			"clusterctl: the meta group that 127.0.0.1:7001 leads has 3 members (127.0.0.1:7001 and 127.0.0.1:7002, 127.0.0.1:7003), and 2 managers are named", false},
		{[]string{three[0], three[1], "127.0.0.1:9003"}, []map[string]string{leader, follower("2", "1"), follower("3", "1")},
			"clusterctl: the manager at 127.0.0.1:9003 (member 3) is not a member of the meta group that 127.0.0.1:7001 leads", false},
		{three, []map[string]string{leader, follower("2", "1"), other}, "clusterctl: the managers do not agree on a leader: the managers at 127.0.0.1:7001 and 127.0.0.1:7003 both lead", true},
		{three, []map[string]string{leader, follower("2", "1"), follower("3", "2")}, "clusterctl: the managers do not agree on a leader: the manager at 127.0.0.1:7003 follows member 2", true},
		{three, []map[string]string{follower("1", "0"), follower("2", "0"), follower("3", "0")}, "clusterctl: the managers do not agree on a leader: none", true},
		{three[1:], []map[string]string{follower("2", "1"), follower("3", "1")},
			"clusterctl: the managers named follow member 1, at 127.0.0.1:7001, which is not named: name every one of the meta group's 3 members", false},
	} {
		err := oneMetaGroup(tc.addrs, tc.infos)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)) ||
			errors.Is(err, errUnsettled) != tc.unsettle {
			t.Errorf("oneMetaGroup(%q) = %v, want %q (unsettled: %v)", tc.addrs, err, tc.want, tc.unsettle)
		}
	}
}
