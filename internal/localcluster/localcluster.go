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
// which keeps the map in memory, manager.log.
//
// A hosted cluster (Config.Hosted) runs its data groups on fewer
// processes: node i of "nodes" (its peer address) hosts, on one log, its
// members of the groups of "hosted" (each group's members' node ids and
// client addresses), each member on its own client port:
//
//	{"nodes": "1=127.0.0.1:40001,...", "hosted": ["1=127.0.0.1:7101,2=127.0.0.1:7102,3=...", ...],
//	 "manager": "127.0.0.1:7000", "secret": "<hex>"}
//
// Node i has n<i> and n<i>.log. A later run on the same directory starts
// the same cluster again, on the same addresses, from the members' data.
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
	// Hosted makes a new sharded cluster's Nodes processes host its
	// Groups data groups, of RF members each (default min(3, Nodes)),
	// spread evenly: see the package doc.
	Hosted bool
	RF     int
}

// layout is cluster.json.
type layout struct {
	Members string   `json:"members,omitempty"`
	Groups  []string `json:"groups,omitempty"`
	Nodes   string   `json:"nodes,omitempty"`
	Hosted  []string `json:"hosted,omitempty"`
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
	if l.Nodes != "" {
		return l.hostedProcs(dir)
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

// hostedProcs returns the processes of a hosted cluster: its manager,
// then its nodes.
func (l layout) hostedProcs(dir string) []proc {
	var servers, groups []string
	for gi, g := range l.Hosted {
		servers = append(servers, strings.Split(g, ",")...)
		groups = append(groups, fmt.Sprintf("%d:%s", gi+1, g))
	}
	rf := len(strings.Split(l.Hosted[0], ","))
	ps := []proc{{name: "manager", addr: l.Manager, log: filepath.Join(dir, "manager.log"),
		args: []string{"serve", "--manager", "--addr", l.Manager, "--servers", strings.Join(servers, ","), "--replicas", fmt.Sprint(rf)}}}
	for _, n := range strings.Split(l.Nodes, ",") {
		id, _, _ := strings.Cut(n, "=")
		name := "n" + id
		ps = append(ps, proc{name: name, addr: hostedAddr(l.Hosted, id), log: filepath.Join(dir, name+".log"),
			args: []string{"serve", "--dir", filepath.Join(dir, name), "--id", id, "--host-nodes", l.Nodes,
				"--host-groups", strings.Join(groups, ";"), "--managers", l.Manager}})
	}
	return ps
}

// hostedAddr returns the client address of node id's first member of the
// groups, or "" if it hosts none.
func hostedAddr(groups []string, id string) string {
	for _, g := range groups {
		for _, m := range strings.Split(g, ",") {
			if n, addr, _ := strings.Cut(m, "="); n == id {
				return addr
			}
		}
	}
	return ""
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
	l, err := load(cfg)
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
	if _, err := fmt.Sscanf(name, "n%d", &m); err == nil {
		return fmt.Sprintf("node %d", m)
	}
	if _, err := fmt.Sscanf(name, "g%dm%d", &g, &m); err == nil {
		return fmt.Sprintf("group %d member %d", g, m)
	}
	if _, err := fmt.Sscanf(name, "m%d", &m); err == nil {
		return fmt.Sprintf("member %d", m)
	}
	return name
}

// load reads the directory's layout, or makes one as cfg says.
func load(cfg Config) (layout, error) {
	var l layout
	dir, n, groups := cfg.Dir, cfg.Nodes, cfg.Groups
	name := filepath.Join(dir, "cluster.json")
	b, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) && cfg.Hosted {
		return createHosted(cfg, name)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return create(dir, name, n, groups)
	}
	if err != nil {
		return l, err
	}
	damaged := fmt.Errorf("localcluster: %s is damaged; move the directory aside to make a new cluster", name)
	if err := json.Unmarshal(b, &l); err != nil || l.Secret == "" {
		return l, damaged
	}
	if l.Nodes != "" || cfg.Hosted {
		return l, l.checkHosted(cfg, damaged)
	}
	if (l.Members == "") == (len(l.Groups) == 0) || (len(l.Groups) > 0) != (l.Manager != "") {
		return l, damaged
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
	freePort := uniquePorts()
	for range max(groups, 1) {
		members, err := newMembers(n, freePort)
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
	return l, l.save(dir, name)
}

// save gives l a new secret and writes it to the file name in dir.
func (l *layout) save(dir, name string) error {
	secret := make([]byte, 16)
	rand.Read(secret)
	l.Secret = hex.EncodeToString(secret)
	b, _ := json.MarshalIndent(l, "", "  ")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(name, append(b, '\n'), 0o600)
}

// checkHosted checks a hosted layout read from a directory against cfg.
func (l layout) checkHosted(cfg Config, damaged error) error {
	switch {
	case l.Nodes == "" || len(l.Hosted) == 0 || l.Manager == "":
		if !cfg.Hosted {
			return damaged
		}
		return fmt.Errorf("localcluster: %s holds a cluster whose groups are not hosted: drop --hosted, or use another directory", cfg.Dir)
	case !cfg.Hosted:
		return fmt.Errorf("localcluster: %s holds a hosted cluster: add --hosted", cfg.Dir)
	case cfg.Nodes != 0 && cfg.Nodes != len(strings.Split(l.Nodes, ",")):
		return fmt.Errorf("%w: %s has %d nodes", ErrNodes, cfg.Dir, len(strings.Split(l.Nodes, ",")))
	case cfg.Groups != 0 && cfg.Groups != len(l.Hosted):
		return fmt.Errorf("%w: %s has %d groups", ErrGroups, cfg.Dir, len(l.Hosted))
	}
	return nil
}

// createHosted makes a new hosted layout: cfg.Groups groups of rf
// members, group g's on nodes g, g+1, ... (mod cfg.Nodes), on free
// loopback ports.
func createHosted(cfg Config, name string) (layout, error) {
	rf := cfg.RF
	if rf == 0 {
		rf = min(3, cfg.Nodes)
	}
	switch {
	case cfg.Nodes < 1 || cfg.Nodes > maxNodes:
		return layout{}, fmt.Errorf("localcluster: --nodes must be 1 to %d for hosted groups", maxNodes)
	case rf < 1 || rf > cfg.Nodes || rf%2 == 0:
		return layout{}, fmt.Errorf("localcluster: --rf must be odd and at most --nodes (%d)", cfg.Nodes)
	case cfg.Groups < 1 || cfg.Groups > maxHostedGroups:
		return layout{}, fmt.Errorf("localcluster: --groups must be 1 to %d for hosted groups", maxHostedGroups)
	}
	var l layout
	var nodes []string
	freePort := uniquePorts()
	for i := range cfg.Nodes {
		peer, err := freePort()
		if err != nil {
			return l, err
		}
		nodes = append(nodes, fmt.Sprintf("%d=127.0.0.1:%d", i+1, peer))
	}
	l.Nodes = strings.Join(nodes, ",")
	for g := range cfg.Groups {
		var members []string
		for r := range rf {
			port, err := freePort()
			if err != nil {
				return l, err
			}
			members = append(members, fmt.Sprintf("%d=127.0.0.1:%d", (g+r)%cfg.Nodes+1, port))
		}
		l.Hosted = append(l.Hosted, strings.Join(members, ","))
	}
	port, err := freePort()
	if err != nil {
		return l, err
	}
	l.Manager = fmt.Sprintf("127.0.0.1:%d", port)
	return l, l.save(cfg.Dir, name)
}

// maxNodes and maxHostedGroups bound a hosted cluster.
const (
	maxNodes        = 16
	maxHostedGroups = 1024
)

// maxGroups bounds a sharded cluster's groups, each member of each a
// process of this machine.
const maxGroups = 16

// ErrGroups refuses a number of groups out of range, or that differs
// from the directory's.
var ErrGroups = fmt.Errorf("localcluster: --groups must be 0 (not sharded) to %d, and match the cluster directory's", maxGroups)

// newMembers returns the --initial-members list of n members on loopback
// ports that freePort gives.
func newMembers(n int, freePort func() (int, error)) (string, error) {
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

// uniquePorts returns a freePort that never returns a port twice: the
// kernel may hand out a port again once its listener is closed (a
// member's client port was once another's peer port), and a hosted
// cluster picks hundreds.
func uniquePorts() func() (int, error) {
	seen := map[int]bool{}
	return func() (int, error) {
		for {
			p, err := freePort()
			if err != nil || !seen[p] {
				seen[p] = true
				return p, err
			}
		}
	}
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
