package lineclient_test

// Scripted tests: each testdata/NAME.in is run against a fresh server and
// what the clients print must equal testdata/NAME.out (go test -update
// rewrites the .out files).
//
// Script format. Lines starting with # are comments and are dropped. A line
// "NAME: COMMAND" is input for the client called NAME; other lines, blank
// ones included, are input for a single unnamed client. Scripts run in one
// of three ways:
//
//   - No named lines: one client gets the whole input at once. The .out file
//     is exactly its output, so `flint client < NAME.in` prints it.
//   - Named lines and a comment "# run: concurrent": every client gets its
//     own lines at once, all clients at the same time. The .out file holds
//     each client's output, client by client, every line prefixed "NAME: ".
//   - Named lines otherwise: lockstep. Each line is sent to its client,
//     whose response is awaited before the next line is sent, so the order
//     of the script is the order in which commands run. Every line must get
//     a response (no malformed lines). The .out file holds the responses in
//     that order, prefixed "NAME: ", then whatever each client prints once
//     its input ends.

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flintkv/flint/client"
	"github.com/flintkv/flint/internal/lineclient"
	"github.com/flintkv/flint/internal/proctest"
	"github.com/flintkv/flint/internal/server"
	"github.com/flintkv/flint/internal/server/servertest"
)

var update = flag.Bool("update", false, "rewrite the expected outputs in testdata/*.out")

// script is a parsed testdata/*.in file.
type script struct {
	name       string
	concurrent bool
	clients    []string // in order of first appearance; "" is the unnamed client
	lines      []line
}

type line struct{ client, text string }

func loadScripts(t *testing.T) []script {
	t.Helper()
	files, err := filepath.Glob("testdata/*.in")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in testdata: %v", err)
	}
	var scripts []script
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		scripts = append(scripts, parseScript(strings.TrimSuffix(filepath.Base(f), ".in"), string(data)))
	}
	return scripts
}

func parseScript(name, text string) script {
	s := script{name: name}
	for _, l := range strings.SplitAfter(text, "\n") {
		if l == "" {
			continue
		}
		if strings.HasPrefix(l, "#") {
			s.concurrent = s.concurrent || strings.TrimSpace(l) == "# run: concurrent"
			continue
		}
		var ln line
		if first, rest, ok := strings.Cut(l, ": "); ok && first != "" && !strings.ContainsAny(first, " \t") {
			ln = line{client: first, text: rest}
		} else {
			ln = line{text: l}
		}
		if !slices.Contains(s.clients, ln.client) {
			s.clients = append(s.clients, ln.client)
		}
		s.lines = append(s.lines, ln)
	}
	return s
}

// input returns the lines for client name.
func (s script) input(name string) string {
	var b strings.Builder
	for _, l := range s.lines {
		if l.client == name {
			b.WriteString(l.text)
		}
	}
	return b.String()
}

// session is one running line client.
type session struct {
	stdin  io.WriteCloser
	stdout *bufio.Reader
	wait   func() error // after stdin is closed and stdout drained
	stderr func() string
}

// starter starts a line client connected to a server.
type starter func(t *testing.T) *session

// inProcess starts clients that run lineclient.Run in this process.
func inProcess(addr string) starter {
	return func(t *testing.T) *session {
		c, err := client.New(addr, client.WithPoolSize(1))
		if err != nil {
			t.Fatal(err)
		}
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		var diag proctest.Buffer
		done := make(chan error, 1)
		go func() {
			err := lineclient.Run(context.Background(), c, inR, outW, &diag)
			inR.Close() // the script may send lines after STOP
			outW.Close()
			c.Close()
			done <- err
		}()
		return &session{stdin: inW, stdout: bufio.NewReader(outR), wait: func() error { return <-done }, stderr: diag.String}
	}
}

// run runs s with clients from start and returns the transcript.
func run(t *testing.T, s script, start starter) string {
	t.Helper()
	sessions := map[string]*session{}
	for _, name := range s.clients {
		sessions[name] = start(t)
	}
	var out strings.Builder
	if s.concurrent || len(s.clients) == 1 && s.clients[0] == "" {
		runConcurrent(t, s, sessions, &out)
	} else {
		runLockstep(t, s, sessions, &out)
	}
	for _, name := range s.clients {
		if err := sessions[name].wait(); err != nil {
			t.Errorf("client %q: %v; stderr:\n%s", name, err, sessions[name].stderr())
		}
		if d := sessions[name].stderr(); d != "" {
			t.Errorf("client %q wrote to stderr:\n%s", name, d)
		}
	}
	return out.String()
}

// runConcurrent feeds every client all its input at once.
func runConcurrent(t *testing.T, s script, sessions map[string]*session, out *strings.Builder) {
	outputs := make(map[string]chan string)
	for _, name := range s.clients {
		sess, ch := sessions[name], make(chan string, 1)
		outputs[name] = ch
		go func() {
			io.WriteString(sess.stdin, s.input(name))
			sess.stdin.Close()
		}()
		go func() {
			b, _ := io.ReadAll(sess.stdout)
			ch <- string(b)
		}()
	}
	for _, name := range s.clients {
		writePrefixed(out, name, within(t, outputs[name], "output of client "+name))
	}
}

// runLockstep sends one line at a time and waits for its response.
func runLockstep(t *testing.T, s script, sessions map[string]*session, out *strings.Builder) {
	for _, l := range s.lines {
		sess := sessions[l.client]
		if _, err := io.WriteString(sess.stdin, l.text); err != nil {
			t.Fatalf("client %s: sending %q: %v", l.client, l.text, err)
		}
		if len(strings.Fields(l.text)) == 0 {
			continue
		}
		ch := make(chan string, 1)
		go func() { ch <- readResponse(sess.stdout) }()
		writePrefixed(out, l.client, within(t, ch, fmt.Sprintf("response of client %s to %q", l.client, l.text)))
	}
	for _, name := range s.clients {
		sessions[name].stdin.Close()
		ch := make(chan string, 1)
		go func() {
			b, _ := io.ReadAll(sessions[name].stdout)
			ch <- string(b)
		}()
		writePrefixed(out, name, within(t, ch, "final output of client "+name))
	}
}

// readResponse reads one response: one line, or a whole SCAN.
func readResponse(r *bufio.Reader) string {
	first, _ := r.ReadString('\n')
	if !strings.HasPrefix(first, "SCAN ") || !strings.HasSuffix(first, " BEGIN\n") {
		return first
	}
	resp := first
	for {
		l, err := r.ReadString('\n')
		resp += l
		if err != nil || l == "SCAN END\n" {
			return resp
		}
	}
}

func within(t *testing.T, ch <-chan string, what string) string {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for the %s", what)
		return ""
	}
}

func writePrefixed(out *strings.Builder, name, text string) {
	for _, l := range strings.SplitAfter(text, "\n") {
		if l == "" {
			continue
		}
		if name != "" {
			out.WriteString(name + ": ")
		}
		out.WriteString(l)
	}
}

// check compares got with testdata/NAME.out, or rewrites it under -update.
func check(t *testing.T, name, got string, mayUpdate bool) {
	t.Helper()
	path := filepath.Join("testdata", name+".out")
	if *update && mayUpdate {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s: output differs from %s\n--- got\n%s--- want\n%s", name, path, got, want)
	}
}

func TestScripts(t *testing.T) {
	for _, s := range loadScripts(t) {
		t.Run(s.name, func(t *testing.T) {
			srv := servertest.Start(t, server.Config{})
			check(t, s.name, run(t, s, inProcess(srv.Addr)), true)
		})
	}
}
