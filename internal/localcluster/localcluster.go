// Package localcluster runs a replicated group, or a sharded cluster of
// such groups, on one machine, each member a `flint serve` process of its
// own on loopback, so that killing one is a real failure: `flint cluster
// up`.
//
// Its directory holds cluster.json, made by the first run:
//
//	{"members": "1=127.0.0.1:7001@40001,...", "secret": "<hex>"}
//
// (the members' --initial-members list, with ports picked free then, and
// the cluster secret), and, for member i, its data directory m<i> and its
// log m<i>.log. A sharded cluster's has a list of members per data group
// and its manager's client address instead of "members":
//
//	{"groups": ["1=127.0.0.1:7001@40001,...", ...], "manager": "127.0.0.1:7000", "secret": "<hex>"}
//
// and member i of group g has g<g>m<i> and g<g>m<i>.log; the manager,
// which keeps the map in memory, manager.log. A later run on the same
// directory starts the same cluster again, on the same addresses, from the
// members' data.
package localcluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Config configures Up.
type Config struct {
	Bin    string    // the flint binary
	Dir    string    // the cluster's directory
	Nodes  int       // members (of each group), for a new directory: 1, 3, 5, 7 or 9
	Groups int       // data groups of a new sharded cluster; 0: one group, not sharded
	Args   []string  // more flags for every member's `flint serve`
	Stdout io.Writer // where the members' addresses and events are written
}

// layout is cluster.json.
type layout struct {
	Members string   `json:"members,omitempty"`
	Groups  []string `json:"groups,omitempty"`
	Manager string   `json:"manager,omitempty"`
	Secret  string   `json:"secret"`
}

// proc is one process of a layout: its name, client address, log and
// flint arguments.
type proc struct {
	name, addr, log string
	args            []string
}

// procs returns the processes of l, in the order they start: a sharded
// cluster's manager first.
func (l layout) procs(dir string) []proc {
	if l.Manager == "" {
		return groupProcs(dir, l.Members, "m", nil)
	}
	var servers []string
	for _, g := range l.Groups {
		for _, m := range strings.Split(g, ",") {
			servers = append(servers, clientAddr(m))
		}
	}
	n := len(strings.Split(l.Groups[0], ","))
	ps := []proc{{name: "manager", addr: l.Manager, log: filepath.Join(dir, "manager.log"),
		args: []string{"serve", "--manager", "--addr", l.Manager, "--servers", strings.Join(servers, ","), "--replicas", fmt.Sprint(n)}}}
	for gi, g := range l.Groups {
		ps = append(ps, groupProcs(dir, g, fmt.Sprintf("g%dm", gi+1), []string{"--shard-group", fmt.Sprint(gi + 1), "--managers", l.Manager})...)
	}
	return ps
}

// groupProcs returns the processes of the group whose --initial-members
// are members, named prefix<i>, with more flags; a group of one is a
// single node.
func groupProcs(dir, members, prefix string, more []string) []proc {
	ids := strings.Split(members, ",")
	ps := make([]proc, len(ids))
	for i, m := range ids {
		name := fmt.Sprint(prefix, i+1)
		args := []string{"serve", "--dir", filepath.Join(dir, name)}
		if len(ids) > 1 || more == nil {
			args = append(args, "--id", fmt.Sprint(i+1), "--initial-members", members)
		} else {
			args = append(args, "--addr", clientAddr(m))
		}
		ps[i] = proc{name: name, addr: clientAddr(m), log: filepath.Join(dir, name+".log"), args: append(args, more...)}
	}
	return ps
}

// clientAddr returns the client address of an "id=host:port@peer" member.
func clientAddr(member string) string {
	_, addrs, _ := strings.Cut(member, "=")
	client, _, _ := strings.Cut(addrs, "@")
	return client
}

// ErrNodes refuses a number of members that cannot make a majority of
// their own, or that differs from the directory's.
var ErrNodes = errors.New("localcluster: --nodes must be 1, 3, 5, 7 or 9, and match the cluster directory's")

// Up starts the group's members and returns once ctx ends, having stopped
// them (SIGTERM, then SIGKILL after stopTimeout); a member that exits
// meanwhile is reported, and the others go on.
func Up(ctx context.Context, cfg Config) error {
	l, err := load(cfg.Dir, cfg.Nodes, cfg.Groups)
	if err != nil {
		return err
	}
	ps := l.procs(cfg.Dir)
	procs := make([]*member, 0, len(ps))
	exits := make(chan int, len(ps))
	for i, p := range ps {
		c, err := start(cfg, l, p)
		if err != nil {
			stopAll(procs)
			return err
		}
		m := &member{cmd: c, done: make(chan struct{})}
		procs = append(procs, m)
		go func() { c.Wait(); close(m.done); exits <- i }()
	}
	for i, m := range procs {
		if !listening(ps[i].addr, m.done) {
			fmt.Fprintf(cfg.Stdout, "%s is not listening on %s; see %s\n", ps[i].name, ps[i].addr, ps[i].log)
			continue
		}
		fmt.Fprintf(cfg.Stdout, "%s: %s (log: %s)\n", describe(ps[i].name), ps[i].addr, ps[i].log)
	}
	fmt.Fprintf(cfg.Stdout, "%d processes up; Ctrl-C stops them\n", len(ps))
	for {
		select {
		case i := <-exits:
			fmt.Fprintf(cfg.Stdout, "%s exited (%v); see %s\n", describe(ps[i].name), procs[i].cmd.ProcessState, ps[i].log)
		case <-ctx.Done():
			stopAll(procs)
			fmt.Fprintln(cfg.Stdout, "stopped")
			return nil
		}
	}
}

// describe turns a process's name into words: "member 2", "group 1
// member 2", "manager".
func describe(name string) string {
	var g, m int
	if _, err := fmt.Sscanf(name, "g%dm%d", &g, &m); err == nil {
		return fmt.Sprintf("group %d member %d", g, m)
	}
	if _, err := fmt.Sscanf(name, "m%d", &m); err == nil {
		return fmt.Sprintf("member %d", m)
	}
	return name
}

// load reads the directory's layout, or makes one for n members in each
// of groups groups (0: one group, not sharded).
func load(dir string, n, groups int) (layout, error) {
	var l layout
	name := filepath.Join(dir, "cluster.json")
	b, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return create(dir, name, n, groups)
	}
	if err != nil {
		return l, err
	}
	if err := json.Unmarshal(b, &l); err != nil || (l.Members == "") == (len(l.Groups) == 0) || l.Secret == "" ||
		(len(l.Groups) > 0) != (l.Manager != "") {
		return l, fmt.Errorf("localcluster: %s is damaged; move the directory aside to make a new cluster", name)
	}
	first := l.Members
	if len(l.Groups) > 0 {
		first = l.Groups[0]
	}
	if got := len(strings.Split(first, ",")); n != 0 && n != got {
		return l, fmt.Errorf("%w: %s has %d members", ErrNodes, dir, got)
	}
	if groups != 0 && groups != len(l.Groups) {
		return l, fmt.Errorf("%w: %s has %d groups", ErrGroups, dir, len(l.Groups))
	}
	return l, nil
}

// create makes a new layout of n members, in each of groups groups if
// groups > 0, on free loopback ports.
func create(dir, name string, n, groups int) (layout, error) {
	if n != 1 && n != 3 && n != 5 && n != 7 && n != 9 {
		return layout{}, ErrNodes
	}
	if groups < 0 || groups > maxGroups {
		return layout{}, ErrGroups
	}
	var l layout
	for range max(groups, 1) {
		members, err := newMembers(n)
		if err != nil {
			return l, err
		}
		l.Groups = append(l.Groups, members)
	}
	if groups == 0 {
		l.Members, l.Groups = l.Groups[0], nil
	} else {
		port, err := freePort()
		if err != nil {
			return l, err
		}
		l.Manager = fmt.Sprintf("127.0.0.1:%d", port)
	}
	secret := make([]byte, 16)
	rand.Read(secret)
	l.Secret = hex.EncodeToString(secret)
	b, _ := json.MarshalIndent(l, "", "  ")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return l, err
	}
	return l, os.WriteFile(name, append(b, '\n'), 0o600)
}

// maxGroups bounds a sharded cluster's groups, each member of each a
// process of this machine.
const maxGroups = 16

// ErrGroups refuses a number of groups out of range, or that differs
// from the directory's.
var ErrGroups = fmt.Errorf("localcluster: --groups must be 0 (not sharded) to %d, and match the cluster directory's", maxGroups)

// newMembers returns the --initial-members list of n members on free
// loopback ports.
func newMembers(n int) (string, error) {
	var members []string
	for i := range n {
		client, err := freePort()
		if err != nil {
			return "", err
		}
		peer, err := freePort()
		if err != nil {
			return "", err
		}
		members = append(members, fmt.Sprintf("%d=127.0.0.1:%d@%d", i+1, client, peer))
	}
	return strings.Join(members, ","), nil
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// start starts process p, its log appended to its log file.
func start(cfg Config, l layout, p proc) (*exec.Cmd, error) {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c := exec.Command(cfg.Bin, append(p.args, cfg.Args...)...)
	c.Env = append(os.Environ(), "FLINT_CLUSTER_SECRET="+l.Secret)
	c.Stdout, c.Stderr = f, f
	if err := c.Start(); err != nil {
		return nil, fmt.Errorf("localcluster: starting %s: %w", describe(p.name), err)
	}
	return c, nil
}

// startTimeout bounds how long a member may take to listen for clients
// (recovering a large data directory takes longer; it is then reported,
// and still runs).
const startTimeout = 30 * time.Second

// listening waits until addr accepts connections, and reports whether it
// did before startTimeout, or before the member exited (done).
func listening(addr string, done <-chan struct{}) bool {
	for deadline := time.Now().Add(startTimeout); time.Now().Before(deadline); {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return true
		}
		select {
		case <-done:
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
	return false
}

// stopTimeout is how long stopAll waits for members to shut down.
const stopTimeout = 15 * time.Second

// member is a started member's process; done is closed once it exited.
type member struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// stopAll stops the members that run: SIGTERM, then SIGKILL for those
// still running after stopTimeout, and waits until every one has exited.
func stopAll(procs []*member) {
	for _, m := range procs {
		m.cmd.Process.Signal(syscall.SIGTERM)
	}
	timeout := time.After(stopTimeout)
	for _, m := range procs {
		select {
		case <-m.done:
		case <-timeout:
			m.cmd.Process.Kill()
			<-m.done
		}
	}
}
