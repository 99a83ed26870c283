package clusterctl

import (
	"errors"
	"strings"
	"testing"
)

// The texts as a leader (member 2) of four serves them, member 3 a
// learner, member 4 a voter that lost its data.
const (
	nodesText = "0000000000000000000000000000000000000001 127.0.0.1:7001@17001 slave 0000000000000000000000000000000000000002 0 0 1 connected\n" +
		"0000000000000000000000000000000000000002 127.0.0.1:7002@17002 myself,master - 0 0 1 connected 0-16383\n" +
		"0000000000000000000000000000000000000003 127.0.0.1:7003@17003 slave 0000000000000000000000000000000000000002 0 0 1 connected\n" +
		"0000000000000000000000000000000000000004 127.0.0.1:7004@17004 slave 0000000000000000000000000000000000000002 0 0 1 connected\n"
	leaderInfo = "# Replication\r\nrole:master\r\nconnected_slaves:3\r\n" +
		"slave0:ip=127.0.0.1,port=7001,state=online,offset=40,lag=2,member=1,voter=1,lost=0\r\n" +
		"slave1:ip=127.0.0.1,port=7003,state=online,offset=30,lag=12,member=3,voter=0,lost=0\r\n" +
		"slave2:ip=127.0.0.1,port=7004,state=online,offset=42,lag=0,member=4,voter=1,lost=1\r\n" +
		"flint_member:2\r\nflint_leader:2\r\nflint_term:5\r\nflint_commit_index:42\r\nflint_applied_index:42\r\nflint_members:4\r\n"
)

func TestStatusFromLeader(t *testing.T) {
	st := fromNodes(nodesText)
	st.fromLeader(parseInfo(leaderInfo))
	st.Members[0].Role, st.Members[0].Term, st.Members[0].Commit, st.Members[0].Applied = "follower", 5, 42, 40
	st.Members[1].Role, st.Members[1].Term, st.Members[1].Commit, st.Members[1].Applied = "leader", 5, 42, 42
	st.Members[2].Err = errors.New("connection refused")
	st.Members[3].Err = errors.New("connection refused")
	if st.Leader != 2 || st.Term != 5 || st.Commit != 42 || len(st.Members) != 4 {
		t.Fatalf("status %+v", st)
	}
	if got := st.successor(); got != 1 {
		t.Errorf("successor = %d, want 1 (3 is a learner, 4 does not answer)", got)
	}
	var b strings.Builder
	if err := st.Write(&b); err != nil {
		t.Fatal(err)
	}
	want := `4 members, 3 voters; member 2 leads in term 5; commit index 42

ID  ADDRESS         ROLE         VOTER  MATCH  LAG  TERM  COMMIT  APPLIED
1   127.0.0.1:7001  follower     yes    40     2    5     42      40
2   127.0.0.1:7002  leader       yes    -      -    5     42      42
3   127.0.0.1:7003  unreachable  no     30     12   -     -       -  (connection refused)
4   127.0.0.1:7004  lost         yes    42     0    -     -       -  (lost its data: remove it, and add the node as a new member)
`
	if b.String() != want {
		t.Errorf("Write:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestStatusNoLeader(t *testing.T) {
	st := fromNodes(strings.ReplaceAll(nodesText, "myself,master - 0 0 1 connected 0-16383", "myself,slave - 0 0 1 connected"))
	if st.Leader != 0 || len(st.Members) != 4 || st.Members[2].Addr != "127.0.0.1:7003" || st.Members[2].ID != 3 {
		t.Fatalf("status %+v", st)
	}
	var b strings.Builder
	st.Write(&b)
	if !strings.Contains(b.String(), "no leader") || !strings.Contains(b.String(), "?") {
		t.Errorf("Write with no leader:\n%s", b.String())
	}
}

// TestStatusSharded: in a sharded cluster CLUSTER NODES lists every
// group's members; the group is the answering member's.
func TestStatusSharded(t *testing.T) {
	nodes := "0000000000000000000000010000000000000001 127.0.0.1:7101@17101 master - 0 0 1 connected 0-8191\n" +
		"0000000000000000000000010000000000000002 127.0.0.1:7102@17102 slave 0000000000000000000000010000000000000001 0 0 1 connected\n" +
		"0000000000000000000000020000000000000002 127.0.0.1:7202@17202 master - 0 0 1 connected 8192-16383\n" +
		"0000000000000000000000020000000000000001 127.0.0.1:7201@17201 myself,slave 0000000000000000000000020000000000000002 0 0 1 connected\n"
	st := fromNodes(nodes)
	if len(st.Members) != 2 || st.Members[0].ID != 2 || st.Members[0].Addr != "127.0.0.1:7202" ||
		st.Members[1].ID != 1 || st.Members[1].Addr != "127.0.0.1:7201" {
		t.Fatalf("members of group 2: %+v", st.Members)
	}
}
