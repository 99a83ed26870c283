package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flintkv/flint/internal/proctest"
)

// TestAddRemoveNode adds a node to group 2 of a cluster of two groups of
// three (`flint cluster add-node`), which every data node's CLUSTER NODES
// then shows, then removes group 2's leader (`remove-node`): a go-redis
// ClusterClient reads and writes group 2's keys throughout. Bad input is
// refused with a clear error: an unknown group, a garbage address, a
// node the map lacks, a group's last member.
func TestAddRemoveNode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cluster")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, addrs, _ := clusterUpArgs(t, "--groups", "2", "--nodes", "3", "--dir", dir)
	manager, g1 := addrs[0], addrs[1:4]
	var layout struct {
		Groups []string `json:"groups"`
		Secret string   `json:"secret"`
	}
	if b, err := os.ReadFile(filepath.Join(dir, "cluster.json")); err != nil || json.Unmarshal(b, &layout) != nil {
		t.Fatalf("cluster.json: %v", err)
	}
	cc := clusterClient([]string{manager})
	defer cc.Close()
	// "a" is in slot 15495 (group 2).
	if err := cc.Set(ctx, "a", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}

	addr, peer := proctest.FreeAddr(t), proctest.FreeAddr(t)
	join := exec.Command(flintBin, "serve", "--id", "4", "--initial-members", layout.Groups[1], "--join", addr+"@"+peer,
		"--shard-group", "2", "--managers", manager, "--dir", filepath.Join(t.TempDir(), "g2m4"), "--huge-pages=false")
	join.Env = append(os.Environ(), "FLINT_CLUSTER_SECRET="+layout.Secret)
	logs := &proctest.Buffer{}
	join.Stderr = logs
	if err := join.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		join.Process.Kill()
		join.Wait()
		if t.Failed() {
			t.Logf("member 4's logs:\n%s", logs)
		}
	})
	clusterChange(t, nil, "member 4 ("+addr+"@"+peer+") was added to group 2, and votes",
		"add-node", "--addr", manager, "--group", "2", "--id", "4", "--node", addr+"@"+peer, "--timeout", "1m")
	for _, a := range append(g1, addr) {
		awaitNodesLine(t, a, addr, "") // group 1's members learn the map; the new member serves it
	}
	// Running it again finds it done.
	clusterChange(t, nil, "was added", "add-node", "--addr", manager, "--group", "2", "--id", "4", "--node", addr+"@"+peer)

	lead := clusterLeader(t, manager, 2)
	out := clusterChange(t, nil, "was removed from group 2", "remove-node", "--addr", manager, "--node", lead, "--timeout", "1m")
	if !strings.Contains(out, "leadership moved to member") || strings.Contains(out, " "+lead+" ") {
		t.Errorf("remove-node of the leader at %s printed:\n%s", lead, out)
	}
	if err := cc.Incr(ctx, "a").Err(); err != nil {
		t.Fatalf("INCR a after group 2's leader was removed: %v", err)
	}
	if v, err := cc.Get(ctx, "a").Result(); err != nil || v != "2" {
		t.Fatalf("a = %q (%v), want 2", v, err)
	}

	for _, bad := range []struct {
		want string
		args []string
	}{
		{"no group 9 in the map", []string{"add-node", "--group", "9", "--id", "5", "--node", "127.0.0.1:1@2"}},
		{"want --group 1 to 65535", []string{"add-node", "--group", "2", "--id", "5", "--node", "garbage"}},
		{"no member at 127.0.0.1:1 in the map", []string{"remove-node", "--node", "127.0.0.1:1"}},
		{"group 1 has no member 7", []string{"remove-node", "--group", "1", "--node", "7"}},
	} {
		out, code := runFlint(t, flintBin, nil, append([]string{"cluster"}, append(bad.args, "--addr", manager, "--timeout", "20s")...)...)
		if code == 0 || !strings.Contains(out, bad.want) {
			t.Errorf("flint cluster %s: exit %d, want an error %q:\n%s", strings.Join(bad.args, " "), code, bad.want, out)
		}
	}
}

// clusterLeader returns the client address of group's leader, as
// `flint cluster status` at the manager shows it, waiting up to 20 s.
func clusterLeader(t *testing.T, manager string, group int) string {
	t.Helper()
	var out string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		out, _ = runFlint(t, flintBin, nil, "cluster", "status", "--addr", manager)
		in := false
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) == 5 {
				in = f[0] == fmt.Sprint(group)
			}
			if in && len(f) >= 3 && f[len(f)-1] == "leader" {
				return f[len(f)-2]
			}
		}
	}
	t.Fatalf("no leader of group %d in 20 s:\n%s", group, out)
	return ""
}

// TestRemoveLastNode: remove-node refuses to remove a group's last member,
// and the group keeps serving.
func TestRemoveLastNode(t *testing.T) {
	_, addrs, _ := clusterUpArgs(t, "--groups", "2", "--nodes", "1", "--dir", filepath.Join(t.TempDir(), "cluster"))
	out, code := runFlint(t, flintBin, nil, "cluster", "remove-node", "--addr", addrs[0], "--node", addrs[1], "--timeout", "20s")
	if code == 0 || !strings.Contains(out, "member 1 is the last of group 1: a group's last member cannot be removed") {
		t.Fatalf("remove-node of a group's last member: exit %d:\n%s", code, out)
	}
	cc := clusterClient(addrs[:1])
	defer cc.Close()
	if err := cc.Set(context.Background(), "b", "v", 0).Err(); err != nil { // "b" is in slot 3300 (group 1)
		t.Fatal(err)
	}
}
