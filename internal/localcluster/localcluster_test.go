package localcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flintkv/flint/internal/proctest"
)

// TestUpPortInUse starts a new hosted cluster of 3 nodes and 2 groups
// whose first member's client port (node 1's, of group 1) is held by this
// test, as another process on a busy machine may take a port between its
// pick and its bind: node 1 exits, and Up makes the cluster again on
// other ports. The cluster that comes up serves the addresses of its
// cluster.json, which are the ones the manager's CLUSTER SLOTS names, and
// the held port is none of them.
func TestUpPortInUse(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	heldPort := held.Addr().(*net.TCPAddr).Port
	ports, picks := uniquePorts(), 0
	pick := func() (int, error) {
		picks++
		if picks == 4 { // after the 3 nodes' peer ports
			return heldPort, nil
		}
		return ports()
	}
	dir := filepath.Join(t.TempDir(), "cluster")
	out := &proctest.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Up(ctx, Config{Bin: proctest.Build(t), Dir: dir, Nodes: 3, Groups: 2, Hosted: true, Stdout: out, pick: pick})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Up: %v", err)
		}
	}()
	for deadline := time.Now().Add(2 * time.Minute); !strings.Contains(out.String(), "processes up"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the cluster is not up after 2 minutes:\n%s", out)
		}
	}
	if !strings.Contains(out.String(), "node 1 found an address in use") || strings.Contains(out.String(), "not listening") {
		t.Fatalf("Up did not report the port in use, then a cluster up:\n%s", out)
	}

	var l layout
	b, err := os.ReadFile(filepath.Join(dir, "cluster.json"))
	if err == nil {
		err = json.Unmarshal(b, &l)
	}
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, g := range l.Hosted {
		for _, m := range strings.Split(g, ",") {
			want = append(want, clientAddr(m))
		}
	}
	if slices.Contains(want, fmt.Sprintf("127.0.0.1:%d", heldPort)) || strings.Contains(l.Nodes, fmt.Sprintf(":%d", heldPort)) {
		t.Fatalf("cluster.json names the port held: %+v", l)
	}
	got := slotsAddrs(t, l.Manager, len(want))
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("CLUSTER SLOTS names %v, cluster.json %v", got, want)
	}
	for _, addr := range want {
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		if err := c.Ping(context.Background()).Err(); err != nil {
			t.Errorf("PING %s: %v", addr, err)
		}
		c.Close()
	}
}

// slotsAddrs returns the addresses that the manager's CLUSTER SLOTS
// names, sorted, once it names n (it learns them from the groups), or
// fails after 30 s.
func slotsAddrs(t *testing.T, manager string, n int) []string {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: manager, MaxRetries: -1})
	defer c.Close()
	var addrs []string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		//lint:ignore SA1019 CLUSTER SLOTS is what go-redis's ClusterClient asks, deprecated or not
		slots, err := c.ClusterSlots(context.Background()).Result()
		if err != nil {
			continue
		}
		addrs = addrs[:0]
		for _, s := range slots {
			for _, nd := range s.Nodes {
				addrs = append(addrs, nd.Addr)
			}
		}
		slices.Sort(addrs)
		if addrs = slices.Compact(addrs); len(addrs) == n {
			return addrs
		}
	}
	t.Fatalf("CLUSTER SLOTS at %s names %v, not %d addresses", manager, addrs, n)
	return nil
}
