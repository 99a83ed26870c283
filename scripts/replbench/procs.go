package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// server is one `flint serve` process: a single node or a member of a group.
type server struct {
	id   int // member id; 0 for a single node
	addr string
	dir  string
	argv []string // the command line
	cmd  *exec.Cmd
}

// deployment is a group of members, or one single node (members[0], id 0).
type deployment struct {
	name    string
	members []*server
}

// running holds the deployments started and not yet stopped, so that an
// interrupted run stops them too.
var running struct {
	sync.Mutex
	m map[*deployment]bool
}

// stopOnSignal stops every running deployment on SIGINT or SIGTERM, then exits.
func stopOnSignal() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-c
		running.Lock()
		for d := range running.m {
			d.stop()
		}
		os.Exit(1)
	}()
}

// startSingle starts a single node in a fresh directory under root.
func startSingle(bin, root string, extra []string) (*deployment, error) {
	s := &server{addr: freeAddr(), dir: filepath.Join(root, "single")}
	s.argv = append([]string{bin, "serve", "--addr", s.addr, "--dir", s.dir}, extra...)
	d := &deployment{name: "single", members: []*server{s}}
	if err := d.start(0); err != nil {
		return nil, err
	}
	return d, d.ready()
}

// pprofBase, if set, has member i of a group serve Go profiles on port
// pprofBase+i.
var pprofBase int

// startGroup starts a group of n members in fresh directories under root,
// with the flags `flint cluster up` gives them, and waits for a leader.
func startGroup(bin, root string, n int, extra []string) (*deployment, error) {
	d := &deployment{name: fmt.Sprintf("group%d", n)}
	list := make([]string, n)
	for i := range n {
		s := &server{id: i + 1, addr: freeAddr(), dir: filepath.Join(root, fmt.Sprint("m", i+1))}
		list[i] = fmt.Sprintf("%d=%s@%s", s.id, s.addr, freeAddr())
		d.members = append(d.members, s)
	}
	for _, s := range d.members {
		s.argv = append([]string{bin, "serve", "--id", fmt.Sprint(s.id), "--initial-members", strings.Join(list, ","),
			"--cluster-secret", "replbench", "--dir", s.dir}, extra...)
		if pprofBase > 0 {
			s.argv = append(s.argv, "--pprof", fmt.Sprintf("127.0.0.1:%d", pprofBase+s.id))
		}
	}
	for i := range d.members {
		if err := d.start(i); err != nil {
			d.stop()
			return nil, err
		}
	}
	if err := d.ready(); err != nil {
		d.stop()
		return nil, err
	}
	_, err := d.leader(time.Minute)
	return d, err
}

// start starts member i, its output appended to <dir>.log.
func (d *deployment) start(i int) error {
	s := d.members[i]
	if err := os.MkdirAll(filepath.Dir(s.dir), 0o755); err != nil {
		return err
	}
	running.Lock()
	defer running.Unlock()
	if running.m == nil {
		running.m = map[*deployment]bool{}
	}
	running.m[d] = true
	f, err := os.OpenFile(s.dir+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	s.cmd = exec.Command(s.argv[0], s.argv[1:]...)
	s.cmd.Stdout, s.cmd.Stderr = f, f
	return s.cmd.Start()
}

// ready waits until every running member answers PING.
func (d *deployment) ready() error {
	for _, s := range d.members {
		if s.cmd == nil {
			continue
		}
		ok := false
		for deadline := time.Now().Add(time.Minute); !ok && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			ok = do(s.addr, "ping") != nil
		}
		if !ok {
			return fmt.Errorf("%s (%s) did not answer PING within a minute; see %s.log", d.name, s.addr, s.dir)
		}
	}
	return nil
}

// stopMember stops member i with SIGTERM (SIGKILL after 30 s) and waits.
func (d *deployment) stopMember(i int) {
	s := d.members[i]
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
	s.cmd = nil
}

// stop stops every member.
func (d *deployment) stop() {
	for i := range d.members {
		d.stopMember(i)
	}
}

// leader returns the index of the member whose ROLE says master (a single
// node always does).
func (d *deployment) leader(wait time.Duration) (int, error) {
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for i, s := range d.members {
			if s.cmd == nil {
				continue
			}
			if v, ok := do(s.addr, "role").([]any); ok && len(v) > 0 && v[0] == "master" {
				return i, nil
			}
		}
	}
	return 0, fmt.Errorf("%s: no leader within %v", d.name, wait)
}

// cpuTicks returns the summed utime+stime of the running members, in
// clock ticks (1/100 s).
func (d *deployment) cpuTicks() int64 {
	var t int64
	for _, s := range d.members {
		if s.cmd != nil {
			t += procCPUTicks(s.cmd.Process.Pid)
		}
	}
	return t
}

// procCPUTicks returns a process's utime+stime in clock ticks, or 0.
func procCPUTicks(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name, field 2, is in parentheses and may hold spaces.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64) // field 14
	s, _ := strconv.ParseInt(f[12], 10, 64) // field 15
	return u + s
}

// memKiB is a process's resident memory, from /proc/PID/status, in KiB.
type memKiB struct {
	rss, hwm   int64 // VmRSS, and its peak VmHWM
	anon, file int64 // RssAnon (the heap, stacks) and RssFile (mapped files)
}

func procMem(pid int) memKiB {
	var m memKiB
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return m
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			m.rss = n
		case "VmHWM":
			m.hwm = n
		case "RssAnon":
			m.anon = n
		case "RssFile":
			m.file = n
		}
	}
	return m
}

// peakMem keeps the highest of each member's memory figures seen by
// sample: the resident set split into anonymous and file-backed pages,
// and the Go heap's objects as INFO memory reports them.
type peakMem struct {
	anon, file, heap map[int]int64 // by member id; heap in bytes
}

func newPeakMem() *peakMem {
	return &peakMem{anon: map[int]int64{}, file: map[int]int64{}, heap: map[int]int64{}}
}

func (p *peakMem) sample(d *deployment) {
	for _, s := range d.members {
		if s.cmd == nil {
			continue
		}
		m := procMem(s.cmd.Process.Pid)
		p.anon[s.id] = max(p.anon[s.id], m.anon)
		p.file[s.id] = max(p.file[s.id], m.file)
		if info, ok := do(s.addr, "info", "memory").(string); ok {
			for _, line := range strings.Split(info, "\r\n") {
				if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
					n, _ := strconv.ParseInt(v, 10, 64)
					p.heap[s.id] = max(p.heap[s.id], n)
				}
			}
		}
	}
}

func (p *peakMem) String() string {
	var b strings.Builder
	for _, id := range slices.Sorted(maps.Keys(p.anon)) {
		fmt.Fprintf(&b, "  member %d: anonymous %.0f MiB, file-backed %.0f MiB, Go heap objects %.0f MiB\n",
			id, float64(p.anon[id])/1024, float64(p.file[id])/1024, float64(p.heap[id])/(1<<20))
	}
	return b.String()
}

// loadavg returns the 1-minute load average, as uptime prints it.
func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}

// quiet drops go-redis's log lines: dial failures while a member starts
// are expected here.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func init() { redis.SetLogger(quiet{}) }

// do sends one command on a connection of its own and returns the reply,
// or nil on any error.
func do(addr string, args ...any) any {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	v, err := c.Do(ctx, args...).Result()
	if err != nil {
		return nil
	}
	return v
}

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// dirBytes returns the bytes of the regular files under dir.
func dirBytes(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}
