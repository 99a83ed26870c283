package lineclient_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flintkv/flint/client"
	"github.com/flintkv/flint/internal/lineclient"
	"github.com/flintkv/flint/internal/replica"
	"github.com/flintkv/flint/internal/resptest"
	"github.com/flintkv/flint/internal/server"
	"github.com/flintkv/flint/internal/server/servertest"
	"github.com/flintkv/flint/internal/vfs"
)

// runInput runs input against a fresh server and returns stdout and stderr.
func runInput(t *testing.T, input string) (string, string, error) {
	t.Helper()
	srv := servertest.Start(t, server.Config{})
	c, err := client.New(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out, diag bytes.Buffer
	err = lineclient.Run(context.Background(), c, strings.NewReader(input), &out, &diag)
	return out.String(), diag.String(), err
}

func TestMalformedLines(t *testing.T) {
	for _, tc := range []struct {
		line, diag string
	}{
		{"FROB k", `line 1 ignored: unknown command "FROB"`},
		{"put k v", `line 1 ignored: unknown command "put"`},
		{"PUT k", "line 1 ignored: PUT takes 3 tokens, got 2; use: PUT <key> <value>"},
		{"PUT k v w", "line 1 ignored: PUT takes 3 tokens, got 4"},
		{"SWAP k", "line 1 ignored: SWAP takes 3 tokens, got 2"},
		{"GET", "line 1 ignored: GET takes 2 tokens, got 1; use: GET <key>"},
		{"DELETE a b", "line 1 ignored: DELETE takes 2 tokens, got 3"},
		{"SCAN a", "line 1 ignored: SCAN takes 3 tokens, got 2; use: SCAN <start> <end>"},
		{"STOP now", "line 1 ignored: STOP takes 1 tokens, got 2"},
	} {
		t.Run(tc.line, func(t *testing.T) {
			out, diag, err := runInput(t, tc.line+"\nPUT k v\nGET k\n")
			if err != nil {
				t.Fatal(err)
			}
			if want := "PUT k not_found\nGET k v\nSTOP\n"; out != want {
				t.Errorf("stdout = %q, want %q (the malformed line skipped)", out, want)
			}
			if !strings.HasPrefix(diag, tc.diag) || strings.Count(diag, "\n") != 1 {
				t.Errorf("stderr = %q, want one line starting %q", diag, tc.diag)
			}
		})
	}
}

func TestEndOfInput(t *testing.T) {
	for _, input := range []string{"", "\n\n", "GET k", "GET k\n", "GET k\r\nSTOP"} {
		out, _, err := runInput(t, input)
		want := "STOP\n"
		if strings.Contains(input, "GET") {
			want = "GET k null\n" + want
		}
		if err != nil || out != want {
			t.Errorf("input %q: output %q, %v; want %q", input, out, err, want)
		}
	}
}

// TestUnansweredResent drops the first PUT and the first GET without an
// answer, as a server that crashes would: both are sent again, and the
// output is as if nothing had happened (the fake server did not apply the
// dropped PUT).
func TestUnansweredResent(t *testing.T) {
	st := resptest.Store{}
	var mu sync.Mutex
	seen := map[string]int{}
	srv := resptest.Start(t, func(args []string) string {
		mu.Lock()
		defer mu.Unlock()
		seen[args[0]]++
		if (args[0] == "SET" || args[0] == "GET") && seen[args[0]] == 1 {
			return resptest.Drop
		}
		return st.Handle(args)
	})
	out, diag, err := runOn(t, []string{srv.Addr}, "PUT k v\nGET k\n")
	if err != nil || out != "PUT k not_found\nGET k v\nSTOP\n" || diag != "" {
		t.Fatalf("Run = %v, output %q, diagnostics %q", err, out, diag)
	}
	mu.Lock()
	defer mu.Unlock()
	if seen["SET"] != 2 || seen["GET"] != 2 {
		t.Fatalf("SET sent %d times and GET %d; want 2 each", seen["SET"], seen["GET"])
	}
}

// TestElection answers the first commands with TRYAGAIN and then with a
// MOVED to the new leader: the commands wait and are answered there.
func TestElection(t *testing.T) {
	leader := resptest.Start(t, resptest.Store{"k": "old"}.Handle)
	var mu sync.Mutex
	n := 0
	member := resptest.Start(t, func(args []string) string {
		mu.Lock()
		defer mu.Unlock()
		if args[0] == "CLUSTER" {
			return resptest.Err("ERR unknown command 'CLUSTER'")
		}
		n++
		if n <= 3 {
			return resptest.Err("TRYAGAIN election in progress")
		}
		return resptest.Moved(866, leader.Addr)
	})
	out, _, err := runOn(t, []string{member.Addr}, "SWAP k new\nGET k\nDELETE k\nSCAN a z\n")
	want := "SWAP k old\nGET k new\nDELETE k found\nSCAN a z BEGIN\nSCAN END\nSTOP\n"
	if err != nil || out != want {
		t.Fatalf("Run = %v, output %q; want %q", err, out, want)
	}
}

// TestServerRestart stops the server between two commands and starts it
// again on the same port: the second command waits and is answered.
func TestServerRestart(t *testing.T) {
	srv := resptest.Start(t, resptest.Store{}.Handle)
	c, err := lineclient.Connect(context.Background(), []string{srv.Addr}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- lineclient.Run(context.Background(), c, inR, outW, io.Discard)
		outW.Close()
	}()
	out := bufio.NewReader(outR)
	expect := func(want string) {
		t.Helper()
		if got, err := out.ReadString('\n'); err != nil || got != want+"\n" {
			t.Fatalf("response %q, %v; want %q", got, err, want)
		}
	}
	go io.WriteString(inW, "PUT k v\n")
	expect("PUT k not_found")
	srv.Stop()
	go io.WriteString(inW, "PUT k w\nGET k\n")
	time.Sleep(300 * time.Millisecond)
	srv.Restart(t)
	expect("PUT k found") // the fake server kept k, as a durable one would
	expect("GET k w")
	inW.Close()
	expect("STOP")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestConnectWaits starts Connect with no server up: it says so once,
// waits, and returns once a server comes up. A server that refuses the
// password ends it at once.
func TestConnectWaits(t *testing.T) {
	srv := resptest.Start(t, resptest.Store{}.Handle)
	srv.Stop()
	dead := freeAddr(t)
	var diag bytes.Buffer
	connected := make(chan error, 1)
	go func() {
		c, err := lineclient.Connect(context.Background(), []string{dead, srv.Addr}, &diag)
		if err == nil {
			c.Close()
		}
		connected <- err
	}()
	time.Sleep(300 * time.Millisecond)
	srv.Restart(t)
	if err := <-connected; err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(diag.String(), "no server answers at "+dead+","+srv.Addr) || strings.Count(diag.String(), "\n") != 1 {
		t.Fatalf("diagnostics %q; want one line saying no server answers", diag.String())
	}

	refusing := resptest.Start(t, func([]string) string { return resptest.Err("WRONGPASS invalid username-password pair") })
	_, err := lineclient.Connect(context.Background(), []string{refusing.Addr}, io.Discard, client.WithPassword("nope"))
	if re, ok := errors.AsType[*client.ReplyError](err); !ok || re.Code() != "WRONGPASS" {
		t.Fatalf("Connect with a wrong password = %v; want WRONGPASS", err)
	}
}

// runOn connects to addrs and runs input, returning stdout and stderr.
func runOn(t *testing.T, addrs []string, input string) (string, string, error) {
	t.Helper()
	var out, diag bytes.Buffer
	c, err := lineclient.Connect(context.Background(), addrs, &diag)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = lineclient.Run(context.Background(), c, strings.NewReader(input), &out, &diag)
	return out.String(), diag.String(), err
}

// freeAddr returns a loopback address that nothing listens on.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestResentWriteOnce runs writes against a replicated server through a
// proxy that drops the reply to the first PUT and the first SWAP after the
// server ran them: the client sends them again in its session, and each
// takes effect once (twice, PUT would report found and SWAP its own value).
func TestResentWriteOnce(t *testing.T) {
	r, err := replica.Open(replica.Options{FS: vfs.NewMem(), Dir: "data", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	srv := servertest.StartBackend(t, server.Config{}, r)
	var mu sync.Mutex
	cut := map[string]bool{}
	p := resptest.StartCutProxy(t, srv.Addr, func(req []byte) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, w := range []string{"SET", "SWAP"} {
			if bytes.Contains(req, []byte(w)) && !cut[w] {
				cut[w] = true
				return true
			}
		}
		return false
	})
	out, diag, err := runOn(t, []string{p.Addr}, "PUT k v\nSWAP k w\nGET k\n")
	if want := "PUT k not_found\nSWAP k v\nGET k w\nSTOP\n"; err != nil || out != want || diag != "" {
		t.Fatalf("Run = %v, output %q, diagnostics %q; want output %q", err, out, diag, want)
	}
	if p.Cuts() != 2 {
		t.Fatalf("the proxy cut %d connections, want 2", p.Cuts())
	}
}

// TestCluster runs the line client against a fake sharded cluster of three
// shards, given every shard's address as the harness gives them: each key
// goes to its shard, writes in that shard's session, and SCAN returns the
// keys of all three in order.
func TestCluster(t *testing.T) {
	cl := resptest.StartCluster(t, 3)
	var in, want strings.Builder
	for i := range 20 {
		fmt.Fprintf(&in, "PUT key%03d v%d\n", i, i)
		fmt.Fprintf(&want, "PUT key%03d not_found\n", i)
	}
	in.WriteString("SWAP key001 w\nDELETE key002\nGET key002\nSCAN key000 key005\n")
	want.WriteString("SWAP key001 v1\nDELETE key002 found\nGET key002 null\nSCAN key000 key005 BEGIN\n" +
		"  key000 v0\n  key001 w\n  key003 v3\n  key004 v4\n  key005 v5\nSCAN END\nSTOP\n")
	var addrs []string
	for _, s := range cl.Servers {
		addrs = append(addrs, s.Addr)
	}
	out, diag, err := runOn(t, addrs, in.String())
	if err != nil || out != want.String() || diag != "" {
		t.Fatalf("Run = %v, output\n%s\ndiagnostics %q; want output\n%s", err, out, diag, want.String())
	}
	if moved, asked := cl.Redirects(); moved+asked != 0 {
		t.Fatalf("%d MOVED and %d ASK; want none", moved, asked)
	}
	for s := range cl.Servers {
		if cl.Count(s, "FLINT.SEQ") == 0 || cl.Count(s, "FLINT.SESSION") != 1 {
			t.Errorf("shard %d got %d writes in %d sessions; want some, in one", s, cl.Count(s, "FLINT.SEQ"), cl.Count(s, "FLINT.SESSION"))
		}
	}
}
