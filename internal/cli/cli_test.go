package cli

import (
	"bytes"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/flintkv/flint/internal/server"
	"github.com/flintkv/flint/internal/server/servertest"
)

// result is what one run of the client did.
type result struct {
	stdout, stderr string
	status         int
}

// run runs the client against addr with stdin as its input.
func run(t *testing.T, addr string, cfg Config, stdin string, args ...string) result {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Host = host
	if cfg.Port, err = strconv.Atoi(port); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	status := Run(cfg, args, strings.NewReader(stdin), &out, &errOut)
	return result{out.String(), errOut.String(), status}
}

func (r result) check(t *testing.T, want result) {
	t.Helper()
	if r != want {
		t.Errorf("got  status %d, stdout %q, stderr %q\nwant status %d, stdout %q, stderr %q",
			r.status, r.stdout, r.stderr, want.status, want.stdout, want.stderr)
	}
}

const unknownFoo = "ERR unknown command 'foo', with args beginning with: 'bar' "

func TestOneShot(t *testing.T) {
	srv := servertest.Start(t, server.Config{})
	raw, tty := Config{Raw: true}, Config{}
	for _, tc := range []struct {
		name string
		cfg  Config
		args []string
		want result
	}{
		{"set", raw, []string{"SET", "k", "v w"}, result{"OK\n", "", 0}},
		{"get raw", raw, []string{"GET", "k"}, result{"v w\n", "", 0}},
		{"get formatted", tty, []string{"GET", "k"}, result{"\"v w\"\n", "", 0}},
		{"nil raw", raw, []string{"GET", "nokey"}, result{"\n", "", 0}},
		{"nil formatted", tty, []string{"GET", "nokey"}, result{"(nil)\n", "", 0}},
		{"binary", tty, []string{"SET", "bin", "a\x00\n\xff"}, result{"OK\n", "", 0}},
		{"binary back", tty, []string{"GET", "bin"}, result{`"a\x00\n\xff"` + "\n", "", 0}},
		{"integer", tty, []string{"INCR", "n"}, result{"(integer) 1\n", "", 0}},
		{"array", tty, []string{"MGET", "k", "nokey", "n"}, result{"1) \"v w\"\n2) (nil)\n3) \"1\"\n", "", 0}},
		{"empty array", tty, []string{"COMMAND", "DOCS", "nosuchcommand"}, result{"(empty array)\n", "", 0}},
		{"empty map in RESP3", Config{RESP3: true}, []string{"COMMAND", "DOCS", "nosuchcommand"}, result{"(empty hash)\n", "", 0}},
		// redis-cli exits 0 after an error reply unless run with -e.
		{"error", tty, []string{"foo", "bar"}, result{"(error) " + unknownFoo + "\n", "", 0}},
		{"error raw", raw, []string{"foo", "bar"}, result{unknownFoo + "\n\n", "", 0}},
		{"error -e", Config{ErrExit: true}, []string{"foo", "bar"}, result{"", unknownFoo + "\n", 1}},
		{"ok -e", Config{ErrExit: true}, []string{"GET", "k"}, result{"\"v w\"\n", "", 0}},
		// INFO is text for people: printed raw, with its own line ends.
		{"info", tty, []string{"INFO", "keyspace"}, result{"# Keyspace\r\ndb0:keys=3,expires=0,avg_ttl=0\r\n", "", 0}},
		{"info in RESP3", Config{RESP3: true}, []string{"info", "keyspace"}, result{"# Keyspace\r\ndb0:keys=3,expires=0,avg_ttl=0\r\n", "", 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run(t, srv.Addr, tc.cfg, "", tc.args...).check(t, tc.want)
		})
	}
}

// script exercises quoting, blank lines, a line that does not split, an
// error reply, and quit, after which nothing more is read.
const script = "set k \"a\\x41\\n\"\n" +
	"get k\r\n" +
	"\n" +
	"   \n" +
	"set k 'unbalanced\n" +
	"foo bar\n" +
	"mget k nokey\n" +
	"QUIT\n" +
	"get k\n"

func TestPiped(t *testing.T) {
	srv := servertest.Start(t, server.Config{})
	run(t, srv.Addr, Config{Raw: true}, script).check(t, result{
		"OK\naA\n\nInvalid argument(s)\n" + unknownFoo + "\n\naA\n\n\n", "", 0})
	run(t, srv.Addr, Config{}, script).check(t, result{
		"OK\n\"aA\\n\"\nInvalid argument(s)\n(error) " + unknownFoo + "\n1) \"aA\\n\"\n2) (nil)\n", "", 0})
	// A last line without a newline still runs.
	run(t, srv.Addr, Config{Raw: true}, "incr n\nincr n").check(t, result{"1\n2\n", "", 0})
}

func TestInteractive(t *testing.T) {
	srv := servertest.Start(t, server.Config{})
	p := srv.Addr + "> "
	cfg := Config{Interactive: true}
	run(t, srv.Addr, cfg, "set k v\nget k\n\nquit\nget k\n").check(t, result{
		p + "OK\n" + p + "\"v\"\n" + p + p, "", 0})
	// EOF ends the prompt's line.
	run(t, srv.Addr, cfg, "get k\n").check(t, result{p + "\"v\"\n" + p + "\n", "", 0})
}

func TestAuth(t *testing.T) {
	srv := servertest.Start(t, server.Config{RequirePass: "pw"})
	const wrongpass = "AUTH failed: WRONGPASS invalid username-password pair or user is disabled.\n"
	run(t, srv.Addr, Config{Password: "pw"}, "", "PING").check(t, result{"PONG\n", "", 0})
	run(t, srv.Addr, Config{Password: "pw", RESP3: true}, "", "PING").check(t, result{"PONG\n", "", 0})
	run(t, srv.Addr, Config{Password: "pw"}, "set k v\nget k\n").check(t, result{"OK\n\"v\"\n", "", 0})
	run(t, srv.Addr, Config{}, "", "PING").check(t, result{"(error) NOAUTH Authentication required.\n", "", 0})

	run(t, srv.Addr, Config{Password: "bad"}, "", "PING").check(t, result{"", wrongpass, 1})
	run(t, srv.Addr, Config{Password: "bad"}, "PING\n").check(t, result{"", wrongpass, 1})
	run(t, srv.Addr, Config{RESP3: true}, "", "PING").check(t, result{"",
		"HELLO 3 failed: NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time\n", 1})
	// At a prompt the connection stays open for an AUTH by hand.
	p := srv.Addr + "> "
	run(t, srv.Addr, Config{Password: "bad", Interactive: true}, "get k\nauth pw\nget k\n").check(t, result{
		p + "(error) NOAUTH Authentication required.\n" + p + "OK\n" + p + "\"v\"\n" + p + "\n", wrongpass, 0})
}

func TestConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	refused := "Could not connect to Flint at " + addr + ": connection refused\n"
	run(t, addr, Config{}, "", "PING").check(t, result{"", refused, 1})
	run(t, addr, Config{}, "PING\nPING\n").check(t, result{"", refused, 1})
	// At a prompt every command tries again.
	run(t, addr, Config{Interactive: true}, "PING\n").check(t, result{
		"not connected> not connected> \n", refused + refused, 0})
}

// hangUp serves connections that each answer one command with PONG, or
// with nothing when silent, and then close.
func hangUp(t *testing.T, silent bool) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			// Commands here are short enough to arrive in one read.
			if _, err := c.Read(make([]byte, 1024)); err == nil && !silent {
				c.Write([]byte("+PONG\r\n"))
			}
			c.Close()
		}
	}()
	return ln.Addr().String()
}

func TestServerHangsUp(t *testing.T) {
	const closed = "Error: Server closed the connection\n"
	run(t, hangUp(t, true), Config{}, "", "PING").check(t, result{"", closed, 1})
	// The second PING goes to a connection the server has closed; the
	// third reconnects.
	addr := hangUp(t, false)
	run(t, addr, Config{}, "PING\nPING\nPING\n").check(t, result{"PONG\nPONG\n", closed, 1})
	p := addr + "> "
	run(t, addr, Config{Interactive: true}, "PING\nPING\nPING\n").check(t, result{
		p + "PONG\n" + p + "not connected> PONG\n" + p + "\n", closed, 0})
}
