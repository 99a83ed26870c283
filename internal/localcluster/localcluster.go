// Package localcluster runs a replicated group on one machine, each member
// a `flint serve` process of its own on loopback, so that killing one is a
// real failure: `flint cluster up`.
//
// Its directory holds cluster.json, made by the first run:
//
//	{"members": "1=127.0.0.1:7001@40001,...", "secret": "<hex>"}
//
// (the members' --initial-members list, with ports picked free then, and
// the cluster secret), and, for member i, its data directory m<i> and its
// log m<i>.log. A later run on the same directory starts the same group
// again, on the same addresses, from the members' data.
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
	Nodes  int       // members, for a new directory: 1, 3, 5, 7 or 9
	Args   []string  // more flags for every member's `flint serve`
	Stdout io.Writer // where the members' addresses and events are written
}

// layout is cluster.json.
type layout struct {
	Members string `json:"members"`
	Secret  string `json:"secret"`
}

// ErrNodes refuses a number of members that cannot make a majority of
// their own, or that differs from the directory's.
var ErrNodes = errors.New("localcluster: --nodes must be 1, 3, 5, 7 or 9, and match the cluster directory's")

// Up starts the group's members and returns once ctx ends, having stopped
// them (SIGTERM, then SIGKILL after stopTimeout); a member that exits
// meanwhile is reported, and the others go on.
func Up(ctx context.Context, cfg Config) error {
	l, err := load(cfg.Dir, cfg.Nodes)
	if err != nil {
		return err
	}
	ids := strings.Split(l.Members, ",")
	procs := make([]*member, 0, len(ids))
	exits := make(chan int, len(ids))
	for i := range ids {
		c, err := start(cfg, l, i)
		if err != nil {
			stopAll(procs)
			return err
		}
		m := &member{cmd: c, done: make(chan struct{})}
		procs = append(procs, m)
		go func() { c.Wait(); close(m.done); exits <- i }()
	}
	for i, m := range procs {
		client, _, _ := strings.Cut(strings.SplitN(ids[i], "=", 2)[1], "@")
		if !listening(client, m.done) {
			fmt.Fprintf(cfg.Stdout, "member %d is not listening on %s; see %s\n", i+1, client, logName(cfg.Dir, i))
			continue
		}
		fmt.Fprintf(cfg.Stdout, "member %d: %s (log: %s)\n", i+1, client, logName(cfg.Dir, i))
	}
	fmt.Fprintf(cfg.Stdout, "%d members up; Ctrl-C stops them\n", len(ids))
	for {
		select {
		case i := <-exits:
			fmt.Fprintf(cfg.Stdout, "member %d exited (%v); see %s\n", i+1, procs[i].cmd.ProcessState, logName(cfg.Dir, i))
		case <-ctx.Done():
			stopAll(procs)
			fmt.Fprintln(cfg.Stdout, "stopped")
			return nil
		}
	}
}

// load reads the directory's layout, or makes one for n members.
func load(dir string, n int) (layout, error) {
	var l layout
	name := filepath.Join(dir, "cluster.json")
	b, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return create(dir, name, n)
	}
	if err != nil {
		return l, err
	}
	if err := json.Unmarshal(b, &l); err != nil || l.Members == "" || l.Secret == "" {
		return l, fmt.Errorf("localcluster: %s is damaged; move the directory aside to make a new cluster", name)
	}
	if got := len(strings.Split(l.Members, ",")); n != 0 && n != got {
		return l, fmt.Errorf("%w: %s has %d members", ErrNodes, dir, got)
	}
	return l, nil
}

// create makes a new layout of n members on free loopback ports.
func create(dir, name string, n int) (layout, error) {
	if n != 1 && n != 3 && n != 5 && n != 7 && n != 9 {
		return layout{}, ErrNodes
	}
	var members []string
	for i := range n {
		client, err := freePort()
		if err != nil {
			return layout{}, err
		}
		peer, err := freePort()
		if err != nil {
			return layout{}, err
		}
		members = append(members, fmt.Sprintf("%d=127.0.0.1:%d@%d", i+1, client, peer))
	}
	secret := make([]byte, 16)
	rand.Read(secret)
	l := layout{Members: strings.Join(members, ","), Secret: hex.EncodeToString(secret)}
	b, _ := json.MarshalIndent(l, "", "  ")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return l, err
	}
	return l, os.WriteFile(name, append(b, '\n'), 0o600)
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

func logName(dir string, i int) string { return filepath.Join(dir, fmt.Sprintf("m%d.log", i+1)) }

// start starts member i, its log appended to its log file.
func start(cfg Config, l layout, i int) (*exec.Cmd, error) {
	f, err := os.OpenFile(logName(cfg.Dir, i), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	args := append([]string{"serve", "--id", fmt.Sprint(i + 1), "--initial-members", l.Members,
		"--dir", filepath.Join(cfg.Dir, fmt.Sprintf("m%d", i+1))}, cfg.Args...)
	c := exec.Command(cfg.Bin, args...)
	c.Env = append(os.Environ(), "FLINT_CLUSTER_SECRET="+l.Secret)
	c.Stdout, c.Stderr = f, f
	if err := c.Start(); err != nil {
		return nil, fmt.Errorf("localcluster: starting member %d: %w", i+1, err)
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
