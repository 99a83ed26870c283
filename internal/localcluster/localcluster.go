// Package localcluster runs a replicated group, or a sharded cluster of
// such groups, on one machine, each member a `flint serve` process of its
// own on loopback, so that killing one is a real failure: `flint cluster
// up`.
//
// Its directory holds cluster.json, made by the first run, of layout
// version 2:
//
//	{"version": 2, "members": "1=127.0.0.1:7001@40001,...", "secret": "<hex>"}
//
// (the members' --initial-members list, with ports picked free then, and
// the cluster secret), and, for member i, its data directory m<i> and its
// log m<i>.log. A sharded cluster's has a list of members per data group
// and its managers' --initial-members instead of "members":
//
//	{"version": 2, "groups": ["1=127.0.0.1:7001@40001,...", ...], "managers": "1=127.0.0.1:7000@40000", "secret": "<hex>"}
//
// and member i of group g has g<g>m<i> and g<g>m<i>.log. The managers are
// a meta group (flint serve --manager --initial-members), whose log keeps
// the cluster map: its first start writes the map of the data groups, the
// slots split evenly, and later starts serve the map as slot moves, splits
// and added or removed members left it. Manager i has manager<i> and
// manager<i>.log, or manager and manager.log if it is the only one.
//
// A hosted cluster (Config.Hosted) runs its data groups on fewer
// processes: node i of "nodes" (its peer address) hosts, on one log, its
// members of the groups of "hosted" (each group's members' node ids and
// client addresses), each member on its own client port:
//
//	{"version": 2, "nodes": "1=127.0.0.1:40001,...", "hosted": ["1=127.0.0.1:7101,2=127.0.0.1:7102,3=...", ...],
//	 "managers": "1=127.0.0.1:7000@40000", "secret": "<hex>"}
//
// Node i has n<i> and n<i>.log, and lists in its GROUPS file the groups
// started on it since (flint cluster add-group --hosted). A later run on
// the same directory starts the same cluster again, on the same
// addresses, from the members' data and the managers' map.
//
// A file without "version" is of version 1, whose sharded clusters had
// "manager", the client address of one manager that kept the map in
// memory, so that every start served the first map again, whatever moved
// since. Up upgrades such a file to version 2: the manager keeps its
// client address, and gets a peer port and the data directory manager.
//
// # Ports
//
// A new cluster's ports are picked free below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), which the kernel hands to every
// listener on port 0 and every outgoing connection: so only a process that
// names one of them can take it, before the member binds it or before a
// later run does. A process counts as up once it listens on every address
// it is given (package procnet), not once something accepts there. If a
// process of a new cluster exits at its first start because one of its
// addresses was in use (another process named it, or took it before the
// pick), Up stops the others, deletes their data directories and
// cluster.json, and makes the cluster again on other ports, up to
// bindTries times: its addresses, the ones every process and the managers
// are given, and CLUSTER SLOTS answers, are those of the start that came
// up. A cluster that ran before keeps its addresses: a member whose address
// is taken is reported.
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
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/flintkv/flint/internal/ask"
	"github.com/flintkv/flint/internal/procnet"
)

// Config configures Up.
type Config struct {
	Bin      string    // the flint binary
	Dir      string    // the cluster's directory
	Nodes    int       // members (of each group), for a new directory: 1, 3, 5, 7 or 9
	Groups   int       // data groups of a new sharded cluster; 0: one group, not sharded
	Managers int       // managers of a new sharded cluster: 1, 3, 5, 7 or 9 (0: 1)
	Args     []string  // more flags for every member's `flint serve`
	Password string    // what the members require (their --requirepass, $FLINT_PASSWORD), to ask the managers for the map
	Stdout   io.Writer // where the members' addresses and events are written
	// Hosted makes a new sharded cluster's Nodes processes host its
	// Groups data groups, of RF members each (default min(3, Nodes)),
	// spread evenly: see the package doc.
	Hosted bool
	RF     int

	// pick picks the ports of a new cluster; nil: uniquePorts(). Tests
	// set it to pick a port in use.
	pick func() (int, error)
}

// ports returns the port picker of a new cluster.
func (cfg Config) ports() func() (int, error) {
	if cfg.pick != nil {
		return cfg.pick
	}
	return uniquePorts()
}

// layout is cluster.json.
type layout struct {
	Version  int      `json:"version,omitempty"` // 0 in a file of version 1
	Members  string   `json:"members,omitempty"`
	Groups   []string `json:"groups,omitempty"`
	Nodes    string   `json:"nodes,omitempty"`
	Hosted   []string `json:"hosted,omitempty"`
	Managers string   `json:"managers,omitempty"`
	Manager  string   `json:"manager,omitempty"` // version 1's in-memory manager
	Secret   string   `json:"secret"`
}

// layoutVersion is the version of cluster.json that this package writes.
const layoutVersion = 2

// proc is one process of a layout: its name, client address, data
// directory, log and flint arguments, and every address it listens on.
type proc struct {
	name, addr, dir, log string
	args                 []string
	listen               []string
}

// procs returns the processes of l, in the order they start: a sharded
// cluster's managers first.
func (l layout) procs(dir string) []proc {
	if l.Managers == "" {
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
	ps := l.managerProcs(dir, servers, len(strings.Split(l.Groups[0], ",")))
	for gi, g := range l.Groups {
		ps = append(ps, groupProcs(dir, g, fmt.Sprintf("g%dm", gi+1), []string{"--shard-group", fmt.Sprint(gi + 1), "--managers", l.managerAddrs()})...)
	}
	return ps
}

// hostedProcs returns the processes of a hosted cluster: its managers,
// then its nodes.
func (l layout) hostedProcs(dir string) []proc {
	var servers, groups []string
	for gi, g := range l.Hosted {
		servers = append(servers, strings.Split(g, ",")...)
		groups = append(groups, fmt.Sprintf("%d:%s", gi+1, g))
	}
	ps := l.managerProcs(dir, servers, len(strings.Split(l.Hosted[0], ",")))
	for _, n := range strings.Split(l.Nodes, ",") {
		id, peer, _ := strings.Cut(n, "=")
		name := "n" + id
		clients, addr := hostedAddrs(l.Hosted, id), ""
		if len(clients) > 0 {
			addr = clients[0]
		}
		ps = append(ps, proc{name: name, addr: addr, dir: filepath.Join(dir, name),
			log: filepath.Join(dir, name+".log"), listen: append(clients, peer),
			args: []string{"serve", "--dir", filepath.Join(dir, name), "--id", id, "--host-nodes", l.Nodes,
				"--host-groups", strings.Join(groups, ";"), "--managers", l.managerAddrs()}})
	}
	return ps
}

// managerProcs returns the processes of the meta group, each started
// with the map it writes if the group holds none: of the data groups
// whose members' client addresses are servers (as --servers lists them),
// replicas to a group, the slots split evenly.
func (l layout) managerProcs(dir string, servers []string, replicas int) []proc {
	ms := strings.Split(l.Managers, ",")
	ps := make([]proc, len(ms))
	for i, m := range ms {
		name := "manager"
		if len(ms) > 1 {
			name = fmt.Sprint(name, i+1)
		}
		ps[i] = proc{name: name, addr: clientAddr(m), dir: filepath.Join(dir, name), log: filepath.Join(dir, name+".log"),
			listen: []string{clientAddr(m), peerAddr(m)},
			args: []string{"serve", "--manager", "--id", fmt.Sprint(i + 1), "--initial-members", l.Managers, "--dir", filepath.Join(dir, name),
				"--servers", strings.Join(servers, ","), "--replicas", fmt.Sprint(replicas)}}
	}
	return ps
}

// managerAddrs returns the managers' client addresses, as data nodes'
// --managers lists them.
func (l layout) managerAddrs() string {
	var addrs []string
	for _, m := range strings.Split(l.Managers, ",") {
		addrs = append(addrs, clientAddr(m))
	}
	return strings.Join(addrs, ",")
}

// hostedAddrs returns the client addresses of node id's members of the
// groups.
func hostedAddrs(groups []string, id string) []string {
	var addrs []string
	for _, g := range groups {
		for _, m := range strings.Split(g, ",") {
			if n, addr, _ := strings.Cut(m, "="); n == id {
				addrs = append(addrs, addr)
			}
		}
	}
	return addrs
}

// groupProcs returns the processes of the group whose --initial-members
// are members, named prefix<i>, with more flags; a group of one is a
// single node.
func groupProcs(dir, members, prefix string, more []string) []proc {
	ids := strings.Split(members, ",")
	ps := make([]proc, len(ids))
	for i, m := range ids {
		name := fmt.Sprint(prefix, i+1)
		args, listen := []string{"serve", "--dir", filepath.Join(dir, name)}, []string{clientAddr(m)}
		if len(ids) > 1 || more == nil {
			args, listen = append(args, "--id", fmt.Sprint(i+1), "--initial-members", members), append(listen, peerAddr(m))
		} else {
			args = append(args, "--addr", clientAddr(m))
		}
		ps[i] = proc{name: name, addr: clientAddr(m), dir: filepath.Join(dir, name), log: filepath.Join(dir, name+".log"),
			listen: listen, args: append(args, more...)}
	}
	return ps
}

// clientAddr returns the client address of an "id=host:port@peer" member.
func clientAddr(member string) string {
	_, addrs, _ := strings.Cut(member, "=")
	client, _, _ := strings.Cut(addrs, "@")
	return client
}

// peerAddr returns the peer address of an "id=host:port@peerport" or
// "id=host:port@peerhost:peerport" member.
func peerAddr(member string) string {
	_, addrs, _ := strings.Cut(member, "=")
	client, peer, _ := strings.Cut(addrs, "@")
	if strings.Contains(peer, ":") {
		return peer
	}
	host, _, _ := net.SplitHostPort(client)
	return net.JoinHostPort(host, peer)
}

// ErrNodes refuses a number of members that cannot make a majority of
// their own, or that differs from the directory's.
var ErrNodes = errors.New("localcluster: --nodes must be 1, 3, 5, 7 or 9, and match the cluster directory's")

// Up starts the group's members and returns once ctx ends, having stopped
// them (SIGTERM, then SIGKILL after stopTimeout); a member that exits
// meanwhile is reported, and the others go on. It says they are up once
// each listens and, in a sharded cluster, the first manager serves the
// map. A new cluster whose start finds an address in use is made again on
// other ports (see the package doc, "Ports").
func Up(ctx context.Context, cfg Config) error {
	l, created, err := load(cfg)
	if err != nil {
		return err
	}
	// Only a cluster whose data directories this run makes is made again.
	fresh := created && !anyExists(l.procs(cfg.Dir))
	for try := 1; ; try++ {
		r, err := startAll(cfg, l)
		if err != nil {
			return err
		}
		if r.inUse < 0 || !fresh || try == bindTries {
			if p := r.ps[0]; l.Managers != "" && !mapServed(ctx, p.addr, cfg.Password) {
				r.report = append(r.report, fmt.Sprintf("%s serves no cluster map yet; see %s", describe(p.name), p.log))
			}
			return r.serve(ctx, cfg.Stdout)
		}
		stopAll(r.procs)
		p := r.ps[r.inUse]
		fmt.Fprintf(cfg.Stdout, "%s found an address in use (see %s); making the new cluster again on other ports\n", describe(p.name), p.log)
		if l, err = remake(cfg, r.ps); err != nil {
			return err
		}
	}
}

// bindTries bounds how many times Up makes a new cluster whose start finds
// an address in use.
const bindTries = 5

// running is one start of a layout's processes.
type running struct {
	ps     []proc
	procs  []*member
	exits  chan int // the index of each process that exits
	report []string // a line per process: up, or not
	inUse  int      // a process that exited as an address was in use, or -1
}

// startAll starts the processes of l, and waits until each listens on its
// addresses, or exited, or startTimeout passed.
func startAll(cfg Config, l layout) (*running, error) {
	r := &running{ps: l.procs(cfg.Dir), inUse: -1}
	r.exits = make(chan int, len(r.ps))
	logStart := make([]int64, len(r.ps))
	for i, p := range r.ps {
		c, off, err := start(cfg, l, p)
		if err != nil {
			stopAll(r.procs)
			return nil, err
		}
		m := &member{cmd: c, done: make(chan struct{})}
		r.procs, logStart[i] = append(r.procs, m), off
		go func() { c.Wait(); close(m.done); r.exits <- i }()
	}
	for i, m := range r.procs {
		p := r.ps[i]
		if err := listening(m, p.listen); err != nil {
			if r.inUse < 0 && addrInUse(p.log, logStart[i]) {
				r.inUse = i
			}
			r.report = append(r.report, fmt.Sprintf("%s is not listening on %s (%v); see %s", describe(p.name), p.addr, err, p.log))
			continue
		}
		r.report = append(r.report, fmt.Sprintf("%s: %s (log: %s)", describe(p.name), p.addr, p.log))
	}
	return r, nil
}

// serve reports r's processes to out, and then each that exits, until ctx
// ends; then it stops them.
func (r *running) serve(ctx context.Context, out io.Writer) error {
	for _, line := range r.report {
		fmt.Fprintln(out, line)
	}
	fmt.Fprintf(out, "%d processes up; Ctrl-C stops them\n", len(r.ps))
	for {
		select {
		case i := <-r.exits:
			fmt.Fprintf(out, "%s exited (%v); see %s\n", describe(r.ps[i].name), r.procs[i].cmd.ProcessState, r.ps[i].log)
		case <-ctx.Done():
			stopAll(r.procs)
			fmt.Fprintln(out, "stopped")
			return nil
		}
	}
}

// anyExists reports whether the data directory of any of ps exists.
func anyExists(ps []proc) bool {
	for _, p := range ps {
		if _, err := os.Stat(p.dir); p.dir != "" && err == nil {
			return true
		}
	}
	return false
}

// remake deletes the data directories of ps, stopped, and cluster.json,
// and makes a new layout as cfg says.
func remake(cfg Config, ps []proc) (layout, error) {
	for _, p := range ps {
		if p.dir == "" {
			continue
		}
		if err := os.RemoveAll(p.dir); err != nil {
			return layout{}, err
		}
	}
	if err := os.Remove(filepath.Join(cfg.Dir, "cluster.json")); err != nil {
		return layout{}, err
	}
	l, _, err := load(cfg)
	return l, err
}

// describe turns a process's name into words: "member 2", "group 1
// member 2", "manager", "manager 2".
func describe(name string) string {
	var g, m int
	if _, err := fmt.Sscanf(name, "manager%d", &m); err == nil {
		return fmt.Sprintf("manager %d", m)
	}
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

// load reads the directory's layout, or makes one as cfg says, and
// reports whether it made it.
func load(cfg Config) (layout, bool, error) {
	name := filepath.Join(cfg.Dir, "cluster.json")
	b, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) && cfg.Hosted {
		l, err := createHosted(cfg, name)
		return l, true, err
	}
	if errors.Is(err, fs.ErrNotExist) {
		l, err := create(cfg, name)
		return l, true, err
	}
	if err != nil {
		return layout{}, false, err
	}
	l, err := read(cfg, b, name)
	return l, false, err
}

// read checks the layout b, read from the file name, against cfg, and
// upgrades one of version 1 (see the package doc), writing it back.
func read(cfg Config, b []byte, name string) (layout, error) {
	var l layout
	damaged := fmt.Errorf("localcluster: %s is damaged; move the directory aside to make a new cluster", name)
	if err := json.Unmarshal(b, &l); err != nil || l.Secret == "" {
		return l, damaged
	}
	if l.Version > layoutVersion {
		return l, fmt.Errorf("localcluster: %s is of layout version %d; this flint reads versions 1 to %d: run a later flint, or move the directory aside to make a new cluster",
			name, l.Version, layoutVersion)
	}
	old := l.Manager
	if old != "" {
		if err := l.upgrade(); err != nil {
			return l, err
		}
	}
	if err := l.check(cfg, damaged); err != nil {
		return l, err
	}
	if old != "" {
		if err := l.save(cfg.Dir, name); err != nil {
			return l, err
		}
		fmt.Fprintf(cfg.Stdout, "upgraded %s to layout version %d: the manager at %s keeps the cluster map in %s from now on "+
			"(it starts from the first map, as before: move again any slots moved before)\n", name, layoutVersion, old, filepath.Join(cfg.Dir, "manager"))
	}
	return l, nil
}

// upgrade makes l, of version 1 with a manager that keeps the map in
// memory, of version 2: the manager is a meta group of one on the same
// client address, with a new peer port.
func (l *layout) upgrade() error {
	port, err := freePort()
	if err != nil {
		return err
	}
	l.Version, l.Managers, l.Manager = layoutVersion, fmt.Sprintf("1=%s@%d", l.Manager, port), ""
	return nil
}

// check checks a layout read from a directory against cfg.
func (l layout) check(cfg Config, damaged error) error {
	if l.Nodes != "" || cfg.Hosted {
		return l.checkHosted(cfg, damaged)
	}
	if (l.Members == "") == (len(l.Groups) == 0) || (len(l.Groups) > 0) != (l.Managers != "") {
		return damaged
	}
	first := l.Members
	if len(l.Groups) > 0 {
		first = l.Groups[0]
	}
	if got := len(strings.Split(first, ",")); cfg.Nodes != 0 && cfg.Nodes != got {
		return fmt.Errorf("%w: %s has %d members", ErrNodes, cfg.Dir, got)
	}
	if cfg.Groups != 0 && cfg.Groups != len(l.Groups) {
		return fmt.Errorf("%w: %s has %d groups", ErrGroups, cfg.Dir, len(l.Groups))
	}
	return l.checkManagers(cfg)
}

// checkManagers checks that cfg asks for the managers l has, if any.
func (l layout) checkManagers(cfg Config) error {
	if n := len(strings.Split(l.Managers, ",")); cfg.Managers != 0 && cfg.Managers != n {
		return fmt.Errorf("%w: %s has %d", ErrManagers, cfg.Dir, n)
	}
	return nil
}

// create makes a new layout of cfg.Nodes members, in each of cfg.Groups
// groups if cfg.Groups > 0, on free loopback ports, and writes it to the
// file name.
func create(cfg Config, name string) (layout, error) {
	n, groups := cfg.Nodes, cfg.Groups
	if n != 1 && n != 3 && n != 5 && n != 7 && n != 9 {
		return layout{}, ErrNodes
	}
	if groups < 0 || groups > maxGroups {
		return layout{}, ErrGroups
	}
	l := layout{Version: layoutVersion}
	freePort := cfg.ports()
	for range max(groups, 1) {
		members, err := newMembers(n, freePort)
		if err != nil {
			return l, err
		}
		l.Groups = append(l.Groups, members)
	}
	var err error
	if groups == 0 {
		l.Members, l.Groups = l.Groups[0], nil
	} else if l.Managers, err = newManagers(cfg.Managers, freePort); err != nil {
		return l, err
	}
	return l, l.save(cfg.Dir, name)
}

// newManagers returns the --initial-members list of a new meta group of
// n managers (0: 1) on loopback ports that freePort gives.
func newManagers(n int, freePort func() (int, error)) (string, error) {
	switch n {
	case 0:
		n = 1
	case 1, 3, 5, 7, 9:
	default:
		return "", ErrManagers
	}
	return newMembers(n, freePort)
}

// ErrManagers refuses a number of managers that cannot make a majority of
// their own, or that differs from the directory's.
var ErrManagers = errors.New("localcluster: --managers must be 1, 3, 5, 7 or 9, and match the cluster directory's")

// save writes l to the file name in dir, giving it a new secret if it has
// none.
func (l *layout) save(dir, name string) error {
	if l.Secret == "" {
		secret := make([]byte, 16)
		rand.Read(secret)
		l.Secret = hex.EncodeToString(secret)
	}
	b, _ := json.MarshalIndent(l, "", "  ")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(name, append(b, '\n'), 0o600)
}

// checkHosted checks a hosted layout read from a directory against cfg.
func (l layout) checkHosted(cfg Config, damaged error) error {
	switch {
	case l.Nodes == "" || len(l.Hosted) == 0 || l.Managers == "":
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
	return l.checkManagers(cfg)
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
	l := layout{Version: layoutVersion}
	var nodes []string
	freePort := cfg.ports()
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
	var err error
	if l.Managers, err = newManagers(cfg.Managers, freePort); err != nil {
		return l, err
	}
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

// freePort returns a loopback port that was free a moment ago, below the
// kernel's ephemeral range if there is room for a cluster there (see the
// package doc), else one the kernel picks.
func freePort() (int, error) {
	if low := ephemeralLow(); low-lowestPort >= 4*maxHostedGroups {
		for range 100 {
			p := lowestPort + mrand.IntN(low-lowestPort)
			if ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p)); err == nil {
				ln.Close()
				return p, nil
			}
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// lowestPort is the lowest port freePort picks: below it are the ports
// of well-known services.
const lowestPort = 10000

// ephemeralLow returns the first port of the kernel's ephemeral range,
// or 0 if it cannot tell.
func ephemeralLow() int {
	var low, high int
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	if _, err := fmt.Sscan(string(b), &low, &high); err != nil {
		return 0
	}
	return low
}

// start starts process p, its log appended to its log file, and returns
// the log's size before.
func start(cfg Config, l layout, p proc) (*exec.Cmd, int64, error) {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	c := exec.Command(cfg.Bin, append(p.args, cfg.Args...)...)
	c.Env = append(os.Environ(), "FLINT_CLUSTER_SECRET="+l.Secret)
	c.Stdout, c.Stderr = f, f
	if err := c.Start(); err != nil {
		return nil, 0, fmt.Errorf("localcluster: starting %s: %w", describe(p.name), err)
	}
	return c, fi.Size(), nil
}

// startTimeout bounds how long a member may take to listen for clients
// (recovering a large data directory takes longer; it is then reported,
// and still runs).
const startTimeout = 30 * time.Second

// listening waits until m's process listens on every one of addrs, and
// returns why not if it exited first, or startTimeout passed.
func listening(m *member, addrs []string) error {
	err := errors.New("not started")
	for deadline := time.Now().Add(startTimeout); time.Now().Before(deadline); {
		var ok bool
		if ok, err = procnet.Listens(m.cmd.Process.Pid, addrs...); ok {
			return nil
		}
		select {
		case <-m.done:
			return fmt.Errorf("exited: %v", m.cmd.ProcessState)
		case <-time.After(50 * time.Millisecond):
		}
	}
	return err
}

// mapServed waits until the manager at addr serves a cluster map (which a
// new meta group writes once it elected a leader, and a meta group
// started again reads back from its log), and reports whether it did
// before startTimeout, or before ctx ended.
func mapServed(ctx context.Context, addr, password string) bool {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for {
		if _, _, _, err := ask.Map(ctx, addr, password); err == nil {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// addrInUse reports whether the log file name says, after its first off
// bytes, that an address was in use.
func addrInUse(name string, off int64) bool {
	f, err := os.Open(name)
	if err != nil {
		return false
	}
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, off, 1<<20))
	return err == nil && strings.Contains(string(b), "address already in use")
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
