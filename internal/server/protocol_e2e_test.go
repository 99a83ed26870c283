package server_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flintkv/flint/internal/server"
)

// TestRESP3 checks the replies whose encoding differs between RESP2 and
// RESP3, byte for byte, and that go-redis speaking RESP3 reads them.
func TestRESP3(t *testing.T) {
	srv := start(t, server.Config{})
	c := ctx(t)

	t.Run("encoding", func(t *testing.T) {
		raw := dialRaw(t, srv.Addr)
		raw.send(command("SET", "present", "x"))
		raw.expectBytes("+OK\r\n")
		// RESP2 first, then the same commands after HELLO 3.
		resp2 := []string{"$-1\r\n", "*2\r\n$1\r\nx\r\n$-1\r\n", "*1\r\n$-1\r\n", "$-1\r\n", "*0\r\n", "$-1\r\n"}
		resp3 := []string{"_\r\n", "*2\r\n$1\r\nx\r\n_\r\n", "*1\r\n_\r\n", "_\r\n", "%0\r\n", "_\r\n"}
		cmds := []string{
			command("GET", "absent"),
			command("MGET", "present", "absent"),
			command("COMMAND", "INFO", "nosuch"),
			command("CLIENT", "GETNAME"),
			command("COMMAND", "DOCS", "nosuch"),
			command("SET", "present", "y", "NX"),
		}
		for i, cmd := range cmds {
			raw.send(cmd)
			raw.expectBytes(resp2[i])
		}
		raw.send(command("COMMAND", "INFO", "get"))
		// Byte for byte what redis-server 7.0 replies, key spec included.
		raw.expectBytes("*1\r\n*10\r\n$3\r\nget\r\n:2\r\n*2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n" +
			"*3\r\n+@read\r\n+@string\r\n+@fast\r\n*0\r\n*1\r\n*6\r\n$5\r\nflags\r\n*2\r\n+RO\r\n+access\r\n" +
			"$12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n*2\r\n$5\r\nindex\r\n:1\r\n" +
			"$9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n*6\r\n$7\r\nlastkey\r\n:0\r\n" +
			"$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n*0\r\n")

		raw.send(command("HELLO", "3"))
		hello := raw.read()
		if hello.Kind != '%' || len(hello.Elems) != 14 {
			t.Fatalf("HELLO 3 = %s (kind %c), want a map of 7 pairs", hello, hello.Kind)
		}
		fields := map[string]string{}
		for i := 0; i < len(hello.Elems); i += 2 {
			fields[string(hello.Elems[i].Str)] = hello.Elems[i+1].String()
		}
		if fields["server"] != `"flint"` || fields["proto"] != "3" || fields["modules"] != "[]" {
			t.Fatalf("HELLO 3 fields = %v", fields)
		}
		for i, cmd := range cmds {
			raw.send(cmd)
			raw.expectBytes(resp3[i])
		}
		raw.send(command("COMMAND", "INFO", "get"))
		raw.expectBytes("*1\r\n*10\r\n$3\r\nget\r\n:2\r\n~2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n" +
			"~3\r\n+@read\r\n+@string\r\n+@fast\r\n~0\r\n~1\r\n%3\r\n$5\r\nflags\r\n~2\r\n+RO\r\n+access\r\n" +
			"$12\r\nbegin_search\r\n%2\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n%1\r\n$5\r\nindex\r\n:1\r\n" +
			"$9\r\nfind_keys\r\n%2\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n%3\r\n$7\r\nlastkey\r\n:0\r\n" +
			"$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n~0\r\n")
		raw.send(command("INFO", "keyspace"))
		raw.expectBytes("=48\r\ntxt:# Keyspace\r\ndb0:keys=1,expires=0,avg_ttl=0\r\n\r\n")
		raw.send(command("INFO"))
		if v := raw.read(); v.Kind != '=' || !strings.HasPrefix(string(v.Str), "# Server\r\n") {
			t.Fatalf("INFO in RESP3 = kind %c %q, want a verbatim string", v.Kind, v.Str)
		}
		raw.send(command("CLIENT", "INFO"))
		if v := raw.read(); v.Kind != '=' || !strings.HasPrefix(string(v.Str), "id=") {
			t.Fatalf("CLIENT INFO in RESP3 = kind %c %q, want a verbatim string", v.Kind, v.Str)
		}
		// And back to RESP2.
		raw.send(command("HELLO", "2"))
		if v := raw.read(); v.Kind != '*' || len(v.Elems) != 14 {
			t.Fatalf("HELLO 2 = %s, want a flat array of 14", v)
		}
		raw.send(command("GET", "absent"))
		raw.expectBytes("$-1\r\n")
	})

	t.Run("go-redis", func(t *testing.T) {
		rdb := newClient(t, srv.Addr, &redis.Options{Protocol: 3})
		if err := rdb.Get(c, "absent").Err(); err != redis.Nil {
			t.Fatalf("GET missing: %v, want redis.Nil", err)
		}
		if err := rdb.Do(c, "GET", "absent").Err(); err != redis.Nil {
			t.Fatalf("Do GET missing: %v, want redis.Nil", err)
		}
		if err := rdb.Set(c, "k", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if v, err := rdb.MGet(c, "k", "absent").Result(); err != nil || !slices.Equal(v, []any{"v", nil}) {
			t.Fatalf("MGET = %#v, %v", v, err)
		}
		if err := rdb.SetArgs(c, "k", "w", redis.SetArgs{Mode: "NX"}).Err(); err != redis.Nil {
			t.Fatalf("SET NX existing: %v, want redis.Nil", err)
		}
		m, err := rdb.Do(c, "HELLO", "3").Result()
		if err != nil {
			t.Fatal(err)
		}
		if mm, ok := m.(map[any]any); !ok || mm["server"] != "flint" || mm["proto"] != int64(3) {
			t.Fatalf("HELLO 3 = %#v, want a map", m)
		}
		conn := rdb.Conn()
		defer conn.Close()
		hm, err := conn.Hello(c, 3, "", "", "").Result()
		if err != nil || hm["proto"] != int64(3) || hm["version"] != "7.0.0" {
			t.Fatalf("Hello = %v, %v", hm, err)
		}
		info, err := rdb.Info(c).Result()
		if err != nil || !strings.HasPrefix(info, "# Server\r\n") || !strings.Contains(info, "# Keyspace\r\ndb0:keys=") {
			t.Fatalf("INFO = %q, %v", info, err)
		}
		ci, err := conn.ClientInfo(c).Result()
		if err != nil || ci.ID == 0 {
			t.Fatalf("CLIENT INFO = %+v, %v", ci, err)
		}
		cmds, err := rdb.Command(c).Result()
		if err != nil || cmds["get"] == nil || !cmds["get"].ReadOnly {
			t.Fatalf("COMMAND in RESP3: %v", err)
		}
		if err := conn.ClientGetName(c).Err(); err != redis.Nil {
			t.Fatalf("CLIENT GETNAME: %v, want redis.Nil", err)
		}
	})
}

// TestAuth checks RequirePass: what a client may do before AUTH, and every
// way of authenticating.
func TestAuth(t *testing.T) {
	const pass = "s3cret"
	srv := start(t, server.Config{RequirePass: pass})
	c := ctx(t)
	const noauth = "(error) NOAUTH Authentication required."
	const wrongpass = "(error) WRONGPASS invalid username-password pair or user is disabled."

	t.Run("raw", func(t *testing.T) {
		raw := dialRaw(t, srv.Addr)
		for _, cmd := range [][]string{{"GET", "k"}, {"SET", "k", "v"}, {"PING"}, {"INFO"}, {"CLIENT", "ID"}, {"COMMAND"}} {
			if got := raw.do(cmd...).String(); got != noauth {
				t.Fatalf("%q before AUTH = %s, want %s", cmd, got, noauth)
			}
		}
		// As Redis 7 orders its checks: unknown command and arity before
		// authentication.
		for cmd, want := range map[string]string{
			"foo bar": "(error) ERR unknown command 'foo', with args beginning with: 'bar' ",
			"GET":     "(error) ERR wrong number of arguments for 'get' command",
		} {
			if got := raw.do(strings.Fields(cmd)...).String(); got != want {
				t.Fatalf("%q before AUTH = %s, want %s", cmd, got, want)
			}
		}
		v := raw.do("HELLO", "3")
		if !v.IsError() || !strings.HasPrefix(string(v.Str), "NOAUTH HELLO must be called with the client already authenticated") {
			t.Fatalf("HELLO 3 before AUTH = %s", v)
		}
		for _, cmd := range [][]string{{"AUTH", "wrong"}, {"AUTH", "default", "wrong"}, {"AUTH", "admin", pass}, {"AUTH", ""},
			{"HELLO", "3", "AUTH", "default", "wrong"}, {"HELLO", "2", "AUTH", "root", pass}} {
			if got := raw.do(cmd...).String(); got != wrongpass {
				t.Fatalf("%q = %s, want %s", cmd, got, wrongpass)
			}
		}
		if got := raw.do("GET", "k").String(); got != noauth {
			t.Fatalf("GET after failed logins = %s", got)
		}
		raw.send(command("AUTH", pass))
		raw.expect(`"OK"`)
		raw.send(command("GET", "k"))
		raw.expectBytes("$-1\r\n")
		// A failed AUTH does not undo an earlier success.
		if got := raw.do("AUTH", "wrong").String(); got != wrongpass {
			t.Fatalf("wrong AUTH after login = %s", got)
		}
		raw.send(command("SET", "k", "v"))
		raw.expect(`"OK"`)

		// AUTH user pass, and HELLO AUTH, which also switches protocol and
		// names the client.
		raw2 := dialRaw(t, srv.Addr)
		raw2.send(command("AUTH", "default", pass))
		raw2.expect(`"OK"`)
		raw2.send(command("GET", "k"))
		raw2.expect(`"v"`)
		raw3 := dialRaw(t, srv.Addr)
		if v := raw3.do("HELLO", "3", "AUTH", "default", pass, "SETNAME", "h3"); v.Kind != '%' {
			t.Fatalf("HELLO 3 AUTH = %s", v)
		}
		raw3.send(command("GET", "absent"))
		raw3.expectBytes("_\r\n")
		raw3.send(command("CLIENT", "GETNAME"))
		raw3.expect(`"h3"`)

		// QUIT needs no AUTH.
		raw4 := dialRaw(t, srv.Addr)
		raw4.send(command("QUIT"))
		raw4.expect(`"OK"`)
		raw4.expectClosed()
	})

	t.Run("go-redis", func(t *testing.T) {
		for _, opt := range []*redis.Options{
			{Password: pass},
			{Username: "default", Password: pass},
			{Password: pass, Protocol: 3},
			{Password: pass, Protocol: 2, ClientName: "named"},
		} {
			rdb := newClient(t, srv.Addr, opt)
			if err := rdb.Set(c, "gr", "1", 0).Err(); err != nil {
				t.Fatalf("SET with %+v: %v", opt, err)
			}
			if v, err := rdb.Get(c, "gr").Result(); err != nil || v != "1" {
				t.Fatalf("GET with %+v: %q, %v", opt, v, err)
			}
		}
		anon := newClient(t, srv.Addr, nil)
		wantErr(t, anon.Get(c, "gr").Err(), "NOAUTH Authentication required.")
		conn := anon.Conn()
		defer conn.Close()
		wantErr(t, conn.Auth(c, "wrong").Err(), "WRONGPASS invalid username-password pair or user is disabled.")
		if err := conn.Auth(c, pass).Err(); err != nil {
			t.Fatal(err)
		}
		if err := conn.AuthACL(c, "default", pass).Err(); err != nil {
			t.Fatal(err)
		}
		if v, err := conn.Get(c, "gr").Result(); err != nil || v != "1" {
			t.Fatalf("GET after AUTH: %q, %v", v, err)
		}
		bad := newClient(t, srv.Addr, &redis.Options{Password: "wrong"})
		if err := bad.Ping(c).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
			t.Fatalf("client with a wrong password: %v, want WRONGPASS", err)
		}
	})
}

// TestInline checks inline commands, as typed into telnet or sent by
// redis-cli's older modes.
func TestInline(t *testing.T) {
	srv := start(t, server.Config{})
	raw := dialRaw(t, srv.Addr)

	raw.send("PING\r\n")
	raw.expectBytes("+PONG\r\n")
	raw.send("ping\n") // LF alone ends a line too
	raw.expectBytes("+PONG\r\n")
	raw.send("PING hello\r\n")
	raw.expectBytes("$5\r\nhello\r\n")
	raw.send(`SET "a b" 'c d'` + "\r\n")
	raw.expectBytes("+OK\r\n")
	raw.send(command("GET", "a b"))
	raw.expectBytes("$3\r\nc d\r\n")
	// Escapes inside double quotes; an escaped quote inside single quotes.
	raw.send(`ECHO "x\x41\ty\n\"q\""` + "\r\n")
	raw.expectBytes("$8\r\nxA\ty\n\"q\"\r\n")
	// As in Redis, a quote inside a word starts a quoted part of it, and
	// only space, tab, CR and LF end a word.
	raw.send(`SET k a"b"` + "\r\nGET k\r\nECHO \va\vb\r\n")
	raw.expectBytes("+OK\r\n$2\r\nab\r\n$3\r\na\vb\r\n")
	raw.send(`SET 'it\'s' ""` + "\r\n")
	raw.expectBytes("+OK\r\n")
	if v, ok := srv.Store.Get([]byte("it's")); !ok || len(v) != 0 {
		t.Fatalf("inline SET 'it\\'s' \"\" stored %q, %v", v, ok)
	}
	// Blank lines are skipped; several commands in one write, inline and
	// multi-bulk mixed, answer in order.
	raw.send("\r\n\n   \r\nSET n 1\r\nINCR n\r\n" + command("INCR", "n") + "GET n\r\n")
	raw.expectBytes("+OK\r\n:2\r\n:3\r\n$1\r\n3\r\n")
	// An inline command split across writes.
	raw.send("PI")
	raw.send("NG\r\n")
	raw.expectBytes("+PONG\r\n")
	raw.send("  foo   a  b \r\n")
	raw.expect("(error) ERR unknown command 'foo', with args beginning with: 'a' 'b' ")

	// Unbalanced quotes are a protocol error: reply, then close.
	raw.send(`ECHO "unbalanced` + "\r\n")
	raw.expect("(error) ERR Protocol error: unbalanced quotes in request")
	raw.expectClosed()
}

// TestUnauthenticatedLimits checks Redis's tighter request limits before
// AUTH (10 arguments, 16 KiB per argument), and the normal ones after.
func TestUnauthenticatedLimits(t *testing.T) {
	srv := start(t, server.Config{RequirePass: "pw"})
	for req, want := range map[string]string{
		"*11\r\n":                        "-ERR Protocol error: unauthenticated multibulk length\r\n",
		"*2\r\n$4\r\nPING\r\n$20000\r\n": "-ERR Protocol error: unauthenticated bulk length\r\n",
	} {
		raw := dialRaw(t, srv.Addr)
		raw.send(req)
		raw.expectBytes(want)
		raw.expectClosed()
	}
	raw := dialRaw(t, srv.Addr)
	if v := raw.do("AUTH", "pw"); v.String() != `"OK"` {
		t.Fatalf("AUTH: %s", v)
	}
	big := strings.Repeat("v", 20000)
	args := []string{"MSET"}
	for i := range 6 {
		args = append(args, fmt.Sprintf("k%d", i), big)
	}
	if v := raw.do(args...); v.String() != `"OK"` {
		t.Fatalf("13-argument MSET of 20 KB values after AUTH: %s", v)
	}
}
