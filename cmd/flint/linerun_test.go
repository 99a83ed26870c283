package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flintkv/flint/internal/check"
	"github.com/flintkv/flint/internal/proctest"
)

// harnessKeys are the keys of the harness's runs on shared keys.
var harnessKeys = []string{"key00000", "key00001", "key00002", "key00003", "key00004"}

// answerTimeout bounds the wait for one answer. The harness waits 60 s;
// a server down for seconds, or a failover, must fit well inside that.
const answerTimeout = 45 * time.Second

// historyOp, historyFault and historyFile are history.json's version 1,
// as package check documents it.
type historyOp struct {
	Client int      `json:"client"`
	Call   int64    `json:"call"`
	Return int64    `json:"return"`
	Cmd    []string `json:"cmd"`
	Reply  *string  `json:"reply"` // nil is JSON null: a nil reply
	Final  bool     `json:"final,omitempty"`
}

type historyFault struct {
	Kind  string `json:"kind"`
	Start int64  `json:"start"`
	End   int64  `json:"end"`
}

type historyFile struct {
	Version int            `json:"version"`
	Command string         `json:"command"`
	Seed    uint64         `json:"seed"`
	Clients int            `json:"clients"`
	Keys    []string       `json:"keys"`
	Faults  []historyFault `json:"faults"`
	Ops     []historyOp    `json:"ops"`
}

// A lineRun drives `flint harness client` processes as the users' course
// harness does, through their standard input and output, one command at a
// time each, and records every command and its answer as an op of a
// history in the format of package check (history.json, see its package
// doc). The history is then checked as `flint check --recheck` checks
// one: the model takes the line client's answers as they are, PUT's and
// DELETE's found or not_found included.
type lineRun struct {
	t       *testing.T
	seed    uint64
	clients []*lineClient
	start   time.Time // the history's clock starts here
	// answered counts the workload's answers so far, for faults that
	// strike at some point of the run; finished is closed when it ends.
	answered atomic.Int64
	finished chan struct{}
	mu       struct {
		sync.Mutex
		ops    []historyOp
		faults []historyFault
	}
}

// startLineRun starts n line clients of the managers at managers
// (comma-separated), which wait for the cluster as the harness's do.
func startLineRun(t *testing.T, seed uint64, n int, managers string) *lineRun {
	r := &lineRun{t: t, seed: seed, start: time.Now(), finished: make(chan struct{})}
	for id := range n {
		r.clients = append(r.clients, startLineClient(t, id, managers))
	}
	return r
}

// now is the history's clock.
func (r *lineRun) now() int64 { return int64(time.Since(r.start)) }

// fault records a fault from start to end (times of now).
func (r *lineRun) fault(kind string, start, end int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.faults = append(r.mu.faults, historyFault{kind, start, end})
}

// workload returns client id's n commands: PUT (25%), SWAP (25%), GET
// (35%) and DELETE (15%) on the harness's keys, drawn from the run's seed.
// Every value written is new ("c<id>-<n>"), so a value read names its
// write.
func (r *lineRun) workload(id, n int) [][]string {
	rng := rand.New(rand.NewPCG(r.seed, uint64(id)+1))
	var cmds [][]string
	for i := range n {
		key := harnessKeys[rng.IntN(len(harnessKeys))]
		switch x := rng.IntN(100); {
		case x < 25:
			cmds = append(cmds, []string{"PUT", key, fmt.Sprintf("c%d-%d", id, i)})
		case x < 50:
			cmds = append(cmds, []string{"SWAP", key, fmt.Sprintf("c%d-%d", id, i)})
		case x < 85:
			cmds = append(cmds, []string{"GET", key})
		default:
			cmds = append(cmds, []string{"DELETE", key})
		}
	}
	return cmds
}

// run runs each client's n commands of workload, all clients at once,
// and returns once every client is done or has failed (which it reports).
func (r *lineRun) run(n int) {
	var wg sync.WaitGroup
	for _, c := range r.clients {
		wg.Go(func() {
			for _, cmd := range r.workload(c.id, n) {
				if err := r.do(c, c.id, cmd, false); err != nil {
					r.t.Errorf("client %d: %v", c.id, err)
					return
				}
				r.answered.Add(1)
			}
		})
	}
	wg.Wait()
	close(r.finished)
}

// awaitAnswered waits until the workload has had n answers, and reports
// whether it has; false if the run ended first.
func (r *lineRun) awaitAnswered(n int) bool {
	for r.answered.Load() < int64(n) {
		select {
		case <-r.finished:
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
	return true
}

// finalReads reads every key once more, after the workload, through the
// first client that has not failed, as the client after the last (as
// flint check's final reads are).
func (r *lineRun) finalReads() {
	i := slices.IndexFunc(r.clients, func(c *lineClient) bool { return c.failed == nil })
	if i < 0 {
		r.t.Errorf("no client left for the final reads")
		return
	}
	for _, k := range harnessKeys {
		if err := r.do(r.clients[i], len(r.clients), []string{"GET", k}, true); err != nil {
			r.t.Errorf("final read: %v", err)
			return
		}
	}
}

// do sends cmd through c and records it, as client id's.
func (r *lineRun) do(c *lineClient, id int, cmd []string, final bool) error {
	call := r.now()
	answer, err := c.do(cmd)
	ret := r.now()
	if err != nil {
		return err
	}
	o := historyOp{Client: id, Call: call, Return: ret, Cmd: cmd, Final: final}
	if answer != "null" || cmd[0] == "PUT" || cmd[0] == "DELETE" {
		o.Reply = &answer
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.ops = append(r.mu.ops, o)
	return nil
}

// stop sends STOP to every client that has not failed, which must answer
// STOP and exit 0.
func (r *lineRun) stop() {
	for _, c := range r.clients {
		if c.failed != nil {
			continue // reported; killed when the test ends
		}
		if err := c.stop(); err != nil {
			r.t.Errorf("client %d: %v", c.id, err)
		}
	}
}

// check writes the history to the test's artifact directory and checks
// it. The run fails unless it is PASS.
func (r *lineRun) check(command string) {
	t := r.t
	r.mu.Lock()
	h := historyFile{Version: 1, Command: command, Seed: r.seed, Clients: len(r.clients),
		Keys: harnessKeys, Faults: slices.Clone(r.mu.faults), Ops: slices.Clone(r.mu.ops)}
	r.mu.Unlock()
	slices.SortStableFunc(h.Ops, func(a, b historyOp) int { return cmp.Compare(a.Call, b.Call) })
	path := filepath.Join(t.ArtifactDir(), "history.json")
	if err := writeHistory(path, h); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	res, err := check.Recheck(path, check.Config{Stdout: &out, CheckTimeout: 2 * time.Minute})
	switch {
	case err != nil:
		t.Fatalf("checking %s: %v", path, err)
	case res.Verdict != check.Pass:
		t.Errorf("the history is %s:\n%s\nthe history: %s (keep it with go test -artifacts; check it again with flint check --recheck)",
			res.Verdict, out.String(), path)
	default:
		t.Logf("the history:\n%s", out.String())
	}
}

// writeHistory writes h to path, one op per line.
func writeHistory(path string, h historyFile) error {
	ops := h.Ops
	h.Ops = nil
	head, err := json.Marshal(h)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	b.Write(head[:bytes.LastIndex(head, []byte(`,"ops"`))])
	b.WriteString(",\n\"ops\": [")
	for i, o := range ops {
		if i > 0 {
			b.WriteByte(',')
		}
		line, err := json.Marshal(o)
		if err != nil {
			return err
		}
		b.WriteString("\n")
		b.Write(line)
	}
	b.WriteString("\n]}\n")
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// latencies summarizes how long the workload's answers took, for the
// test's log: the slowest, and how many took over a second.
func (r *lineRun) latencies() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var slowest time.Duration
	slow := 0
	for _, o := range r.mu.ops {
		d := time.Duration(o.Return - o.Call)
		slowest = max(slowest, d)
		if d > time.Second {
			slow++
		}
	}
	return fmt.Sprintf("%d answers, the slowest in %v, %d over 1 s", len(r.mu.ops), slowest.Round(time.Millisecond), slow)
}

// lineClient is a `flint harness client` process driven through its
// standard input and output.
type lineClient struct {
	id    int
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string // its standard output, line by line, closed at the end
	logs  *proctest.Buffer
	// exited is closed once the process has exited, after the end of its
	// output; then exitErr is Wait's error.
	exited  chan struct{}
	exitErr error
	// failed is the error of a command that got no proper answer. The
	// client is not used after it: it may have exited, or hang.
	failed error
}

// startLineClient starts client id of the managers at managers.
func startLineClient(t *testing.T, id int, managers string) *lineClient {
	c := &lineClient{id: id, lines: make(chan string, 16), logs: &proctest.Buffer{}, exited: make(chan struct{})}
	c.cmd = exec.Command(flintBin, "harness", "client", managers)
	c.cmd.Stderr = c.logs
	var err error
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
		c.exitErr = c.cmd.Wait() // after every read, as Wait wants
		close(c.exited)
	}()
	t.Cleanup(func() {
		c.cmd.Process.Kill()
		<-c.exited
		if t.Failed() {
			t.Logf("line client %d's standard error:\n%s", id, c.logs)
		}
	})
	return c
}

// do sends cmd as one line and returns its answer, the response's last
// word, once the response has echoed the command's name and key.
func (c *lineClient) do(cmd []string) (answer string, err error) {
	defer func() { c.failed = err }()
	line := strings.Join(cmd, " ")
	if _, err := io.WriteString(c.stdin, line+"\n"); err != nil {
		return "", fmt.Errorf("%s: writing to the client: %w", line, err)
	}
	resp, err := c.next()
	if err != nil {
		return "", fmt.Errorf("%s: %w", line, err)
	}
	w := strings.Fields(resp)
	if len(w) != 3 || w[0] != cmd[0] || w[1] != cmd[1] ||
		(cmd[0] == "PUT" || cmd[0] == "DELETE") && w[2] != "found" && w[2] != "not_found" {
		return "", fmt.Errorf("%s: response %q is not one the line protocol allows", line, resp)
	}
	return w[2], nil
}

// next returns the client's next output line. At the end of the output
// it waits for the process to exit, and returns an error.
func (c *lineClient) next() (string, error) {
	select {
	case l, ok := <-c.lines:
		if ok {
			return l, nil
		}
		<-c.exited
		return "", fmt.Errorf("the client's output ended; it exited (%v)", c.exitErr)
	case <-time.After(answerTimeout):
		return "", fmt.Errorf("no answer after %v", answerTimeout)
	}
}

// stop sends STOP, which the client must answer with STOP, then end its
// output and exit with status 0.
func (c *lineClient) stop() error {
	if _, err := io.WriteString(c.stdin, "STOP\n"); err != nil {
		return err
	}
	if l, err := c.next(); err != nil || l != "STOP" {
		return fmt.Errorf("STOP answered %q (%v)", l, err)
	}
	if l, err := c.next(); err == nil {
		return fmt.Errorf("the client wrote %q after STOP", l)
	}
	select {
	case <-c.exited:
		if c.exitErr != nil {
			return fmt.Errorf("after STOP: %w", c.exitErr)
		}
		return nil
	default:
		return fmt.Errorf("the client did not exit after STOP")
	}
}
