package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseMembers(t *testing.T) {
	ms, err := ParseMembers("1=127.0.0.1:6001@7001, 2=10.0.0.2:6001@10.0.0.9:7001")
	if err != nil {
		t.Fatal(err)
	}
	want := []Member{{1, "127.0.0.1:6001", "127.0.0.1:7001"}, {2, "10.0.0.2:6001", "10.0.0.9:7001"}}
	if len(ms) != 2 || ms[0] != want[0] || ms[1] != want[1] {
		t.Fatalf("ParseMembers = %+v, want %+v", ms, want)
	}
	for _, bad := range []string{"", "1", "1=a:1", "0=a:1@2", "x=a:1@2", "1=a@2", "1=a:1@b:c:d", "1=a:1@2,1=b:1@2", "2147483648=a:1@2"} {
		if _, err := ParseMembers(bad); err == nil {
			t.Errorf("ParseMembers(%q) succeeded", bad)
		}
	}
}

// TestClaimDir checks that a data directory is one member's: a new one is
// claimed with a new incarnation, the same member may use it again, and
// another member, another cluster, or a single node is refused, as is a
// damaged IDENTITY; a version 1 IDENTITY gets an incarnation.
func TestClaimDir(t *testing.T) {
	dir := t.TempDir()
	me := identity{cluster: 0xabc, member: 2}
	inc, err := claimDir(dir, me)
	if err != nil || inc == 0 {
		t.Fatalf("a new directory: incarnation %x, %v", inc, err)
	}
	if again, err := claimDir(dir, me); err != nil || again != inc {
		t.Fatalf("the same member again: incarnation %x (was %x), %v", again, inc, err)
	}
	for _, other := range []identity{{0xabc, 3}, {0xdef, 2}, {0, 1}} {
		if _, err := claimDir(dir, other); err == nil || !strings.Contains(err.Error(), "member 2's of cluster") {
			t.Errorf("%v on member 2's directory: %v", other, err)
		}
	}
	wiped := t.TempDir() // the same member on a new directory: a new incarnation
	if other, err := claimDir(wiped, me); err != nil || other == inc || other == 0 {
		t.Errorf("the same member on a new directory: incarnation %x (the first's %x), %v", other, inc, err)
	}
	os.WriteFile(filepath.Join(dir, "IDENTITY"), []byte("flint identity 1\ncluster 0000000000000abc\nmember 2\n"), 0o644)
	if v1, err := claimDir(dir, me); err != nil || v1 == 0 {
		t.Errorf("a version 1 IDENTITY: incarnation %x, %v", v1, err)
	} else if b, _ := os.ReadFile(filepath.Join(dir, "IDENTITY")); !strings.HasPrefix(string(b), "flint identity 2\n") {
		t.Errorf("a version 1 IDENTITY is not rewritten as version 2: %q", b)
	}
	os.WriteFile(filepath.Join(dir, "IDENTITY"), []byte("garbage"), 0o644)
	if _, err := claimDir(dir, me); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("a damaged IDENTITY: %v", err)
	}
	old := t.TempDir() // a single node's directory from before identities
	os.Mkdir(filepath.Join(old, "snap"), 0o755)
	if _, err := claimDir(old, me); err == nil || !strings.Contains(err.Error(), "single node") {
		t.Errorf("a member on a single node's old directory: %v", err)
	}
	if _, err := claimDir(old, identity{0, 1}); err != nil {
		t.Errorf("a single node on its old directory: %v", err)
	}
}

// TestUseStoredID: a hosting node takes the cluster id its directory
// records for it, whatever its list of nodes names; a new directory, or
// one of another member, leaves the id to the flags, and an id given
// that differs from the directory's is refused by claimDir.
func TestUseStoredID(t *testing.T) {
	dir := t.TempDir()
	first := &ClusterConfig{ID: 4, Members: []Member{{ID: 1, Peer: "a:1"}}}
	if err := first.useStoredID(dir); err != nil || first.ClusterID != 0 {
		t.Fatalf("a new directory: cluster id %x, %v; want none", first.ClusterID, err)
	}
	if _, err := claimDir(dir, identity{first.clusterID(), 4}); err != nil {
		t.Fatal(err)
	}
	listed := &ClusterConfig{ID: 4, Members: []Member{{ID: 1, Peer: "a:1"}, {ID: 5, Peer: "b:1"}}}
	if err := listed.useStoredID(dir); err != nil || listed.clusterID() != first.clusterID() {
		t.Fatalf("restarted with another list: cluster id %x, %v; want the directory's %x", listed.clusterID(), err, first.clusterID())
	}
	other := &ClusterConfig{ID: 5, Members: listed.Members}
	if err := other.useStoredID(dir); err != nil || other.ClusterID != 0 {
		t.Fatalf("another member: cluster id %x, %v; want none", other.ClusterID, err)
	}
	given := &ClusterConfig{ID: 4, ClusterID: first.clusterID() ^ 2}
	if err := given.useStoredID(dir); err != nil || given.clusterID() != first.clusterID()^2 {
		t.Fatalf("an id given: %x, %v", given.clusterID(), err)
	}
	if _, err := claimDir(dir, identity{given.clusterID(), 4}); err == nil || !strings.Contains(err.Error(), "member 4's of cluster") {
		t.Fatalf("claimDir with another id given: %v", err)
	}
}
