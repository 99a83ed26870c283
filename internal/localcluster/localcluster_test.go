package localcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
	got := slotsAddrs(t, l.managerAddrs(), len(want))
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

// TestLoadUpgrades: a cluster.json of version 1, whose manager kept the
// map in memory, is upgraded to version 2, and written back: its manager
// is a meta group of one on the same client address, with a data
// directory, and the rest (the secret too) is as it was. A directory of
// another number of managers than asked for, and a layout of a later
// version, are refused.
func TestLoadUpgrades(t *testing.T) {
	for _, v1 := range []string{
		`{"groups": ["1=127.0.0.1:7001@40001", "1=127.0.0.1:7002@40002"], "manager": "127.0.0.1:7000", "secret": "ab"}`,
		`{"nodes": "1=127.0.0.1:40001", "hosted": ["1=127.0.0.1:7101"], "manager": "127.0.0.1:7000", "secret": "ab"}`,
	} {
		dir := t.TempDir()
		name := filepath.Join(dir, "cluster.json")
		if err := os.WriteFile(name, []byte(v1), 0o600); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		cfg := Config{Dir: dir, Stdout: &out, Hosted: strings.Contains(v1, "hosted")}
		l, _, err := load(cfg)
		if err != nil {
			t.Fatalf("load %s: %v", v1, err)
		}
		if l.Version != 2 || l.Manager != "" || !strings.HasPrefix(l.Managers, "1=127.0.0.1:7000@") || l.Secret != "ab" {
			t.Errorf("upgraded to %+v", l)
		}
		if !strings.Contains(out.String(), "upgraded "+name+" to layout version 2") {
			t.Errorf("load printed %q", out.String())
		}
		again, _, err := load(cfg)
		if err != nil || again.Managers != l.Managers || strings.Count(out.String(), "upgraded") != 1 {
			t.Errorf("loaded again: %+v, %v; printed %q", again, err, out.String())
		}
		ps := l.procs(dir)
		if ps[0].name != "manager" || ps[0].addr != "127.0.0.1:7000" ||
			!slices.Equal(ps[0].args[:7], []string{"serve", "--manager", "--id", "1", "--initial-members", l.Managers, "--dir"}) ||
			ps[0].args[7] != filepath.Join(dir, "manager") {
			t.Errorf("the manager runs as %s at %s: %q", ps[0].name, ps[0].addr, ps[0].args)
		}
		if i := slices.Index(ps[1].args, "--managers"); i < 0 || ps[1].args[i+1] != "127.0.0.1:7000" {
			t.Errorf("a data node runs with %q", ps[1].args)
		}
		cfg.Managers = 3
		if _, _, err := load(cfg); !errors.Is(err, ErrManagers) {
			t.Errorf("load with 3 managers of a directory of 1: %v", err)
		}
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cluster.json"), []byte(`{"version": 3, "members": "1=127.0.0.1:7001@40001", "secret": "ab"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := load(Config{Dir: dir}); err == nil || !strings.Contains(err.Error(), "is of layout version 3; this flint reads versions 1 to 2") {
		t.Errorf("load of version 3: %v", err)
	}
}

// TestManagers: a new sharded cluster of three managers runs them as a
// meta group of three, each with its data directory, and its data nodes
// follow all three.
func TestManagers(t *testing.T) {
	dir := t.TempDir()
	l, _, err := load(Config{Dir: dir, Nodes: 1, Groups: 2, Managers: 3})
	if err != nil {
		t.Fatal(err)
	}
	ps := l.procs(dir)
	var addrs []string
	for i, p := range ps[:3] {
		want := []string{"serve", "--manager", "--id", string(rune('1' + i)), "--initial-members", l.Managers,
			"--dir", filepath.Join(dir, p.name)}
		if p.name != "manager"+want[3] || describe(p.name) != "manager "+want[3] || !slices.Equal(p.args[:8], want) {
			t.Errorf("manager %d runs as %s: %q", i+1, p.name, p.args)
		}
		addrs = append(addrs, p.addr)
	}
	for _, p := range ps[3:] {
		if i := slices.Index(p.args, "--managers"); i < 0 || p.args[i+1] != strings.Join(addrs, ",") {
			t.Errorf("%s runs with %q, want --managers %s", p.name, p.args, strings.Join(addrs, ","))
		}
	}
	if _, _, err := load(Config{Dir: t.TempDir(), Nodes: 1, Groups: 2, Managers: 2}); !errors.Is(err, ErrManagers) {
		t.Errorf("a new cluster of 2 managers: %v", err)
	}
}
