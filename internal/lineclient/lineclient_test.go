package lineclient_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flintkv/flint/client"
	"github.com/flintkv/flint/internal/lineclient"
	"github.com/flintkv/flint/internal/server"
	"github.com/flintkv/flint/internal/server/servertest"
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

// TestServerGone checks that a command the server cannot answer ends the
// run with an error, at the latest when the context ends, and prints
// nothing.
func TestServerGone(t *testing.T) {
	srv := servertest.Start(t, server.Config{})
	c, err := client.New(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Do(context.Background(), "PING"); err != nil { // the server has accepted the connection
		t.Fatal(err)
	}
	srv.Stop(t)
	var out, diag bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err = lineclient.Run(ctx, c, strings.NewReader("PUT k v\nGET k\n"), &out, &diag)
	if !errors.Is(err, client.ErrConnect) && !errors.Is(err, client.ErrUnknownOutcome) {
		t.Fatalf("Run against a stopped server: err %v, want a connection error", err)
	}
	if !strings.Contains(err.Error(), "line 1: PUT k v") || out.Len() != 0 {
		t.Fatalf("err %q and output %q; want the failed line named and no output", err, out.String())
	}
}
