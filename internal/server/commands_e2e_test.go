package server_test

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flintkv/flint/internal/server"
)

// TestConnectionCommands covers the commands that manage the connection,
// through go-redis.
func TestConnectionCommands(t *testing.T) {
	srv := start(t, server.Config{})
	rdb := newClient(t, srv.Addr, nil)
	c := ctx(t)

	t.Run("ping", func(t *testing.T) {
		if got, err := rdb.Ping(c).Result(); err != nil || got != "PONG" {
			t.Fatalf("PING = %q, %v", got, err)
		}
		if got, err := rdb.Do(c, "PING", "hello world").Text(); err != nil || got != "hello world" {
			t.Fatalf("PING arg = %q, %v", got, err)
		}
		wantErr(t, rdb.Do(c, "PING", "a", "b").Err(), "ERR wrong number of arguments for 'ping' command")
	})
	t.Run("echo", func(t *testing.T) {
		if got, err := rdb.Echo(c, "x\r\ny").Result(); err != nil || got != "x\r\ny" {
			t.Fatalf("ECHO = %q, %v", got, err)
		}
		wantErr(t, rdb.Do(c, "ECHO").Err(), "ERR wrong number of arguments for 'echo' command")
	})
	t.Run("hello", func(t *testing.T) {
		conn := rdb.Conn()
		defer conn.Close()
		m, err := conn.Hello(c, 2, "", "", "").Result()
		if err != nil {
			t.Fatal(err)
		}
		if m["server"] != "flint" || m["proto"] != int64(2) || m["mode"] != "standalone" || m["role"] != "master" {
			t.Fatalf("HELLO 2 = %v", m)
		}
		if info, err := conn.Info(c, "cluster").Result(); err != nil || info != "# Cluster\r\ncluster_enabled:0\r\n" {
			t.Fatalf("INFO cluster = %q, %v", info, err)
		}
		id, err := conn.ClientID(c).Result()
		if err != nil || m["id"] != id {
			t.Fatalf("HELLO id %v, CLIENT ID %d, %v", m["id"], id, err)
		}
		wantErr(t, conn.Do(c, "HELLO", "4").Err(), "NOPROTO unsupported protocol version")
		wantErr(t, conn.Do(c, "HELLO", "x").Err(), "ERR Protocol version is not an integer or out of range")
		wantErr(t, conn.Do(c, "HELLO", "3", "bogus").Err(), "ERR Syntax error in HELLO option 'bogus'")
		wantErr(t, conn.Do(c, "HELLO", "3", "SETNAME", "a b").Err(),
			"ERR Client names cannot contain spaces, newlines or special characters.")

		m, err = conn.Hello(c, 3, "", "", "hello-name").Result()
		if err != nil || m["proto"] != int64(3) {
			t.Fatalf("HELLO 3 SETNAME = %v, %v", m, err)
		}
		if name, err := conn.ClientGetName(c).Result(); err != nil || name != "hello-name" {
			t.Fatalf("name after HELLO SETNAME = %q, %v", name, err)
		}
		// In RESP3 a missing value is the RESP3 null, which go-redis also reads as Nil.
		if err := conn.Get(c, "hello:missing").Err(); err != redis.Nil {
			t.Fatalf("GET missing in RESP3: %v", err)
		}
		// HELLO with no version keeps the protocol.
		if m, err := conn.Do(c, "HELLO").Result(); err != nil {
			t.Fatal(err)
		} else if mm, ok := m.(map[any]any); !ok || mm["proto"] != int64(3) {
			t.Fatalf("HELLO = %#v, want a RESP3 map with proto 3", m)
		}
		// AUTH inside HELLO without a password configured: as in Redis, the
		// default user takes any password, and there is no other user.
		if m, err := conn.Hello(c, 2, "default", "any", "").Result(); err != nil || m["proto"] != int64(2) {
			t.Fatalf("HELLO 2 AUTH default any = %v, %v", m, err)
		}
		wantErr(t, conn.Do(c, "HELLO", "2", "AUTH", "admin", "pw").Err(),
			"WRONGPASS invalid username-password pair or user is disabled.")
	})
	t.Run("auth without a password configured", func(t *testing.T) {
		wantErr(t, rdb.Do(c, "AUTH", "pw").Err(),
			"ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
		if err := rdb.Do(c, "AUTH", "default", "pw").Err(); err != nil {
			t.Fatalf("AUTH default pw without a password configured: %v", err)
		}
		wantErr(t, rdb.Do(c, "AUTH", "admin", "pw").Err(), "WRONGPASS invalid username-password pair or user is disabled.")
		wantErr(t, rdb.Do(c, "AUTH", "a", "b", "c").Err(), "ERR syntax error")
		wantErr(t, rdb.Do(c, "AUTH").Err(), "ERR wrong number of arguments for 'auth' command")
	})
	t.Run("select", func(t *testing.T) {
		if err := rdb.Do(c, "SELECT", "0").Err(); err != nil {
			t.Fatal(err)
		}
		wantErr(t, rdb.Do(c, "SELECT", "1").Err(), "ERR DB index is out of range")
		wantErr(t, rdb.Do(c, "SELECT", "zero").Err(), "ERR value is not an integer or out of range")
		// go-redis selects the database itself when DB is set.
		other := newClient(t, srv.Addr, &redis.Options{DB: 1})
		if err := other.Ping(c).Err(); err == nil || !strings.Contains(err.Error(), "ERR DB index is out of range") {
			t.Fatalf("client with DB 1: %v", err)
		}
	})
	t.Run("quit", func(t *testing.T) {
		conn := rdb.Conn()
		defer conn.Close()
		if got, err := conn.Do(c, "QUIT").Text(); err != nil || got != "OK" {
			t.Fatalf("QUIT = %q, %v", got, err)
		}
		if err := conn.Ping(c).Err(); err == nil {
			t.Fatal("PING after QUIT succeeded on the same connection")
		}
		// QUIT discards what was pipelined behind it.
		raw := dialRaw(t, srv.Addr)
		raw.send("QUIT\r\n" + command("SET", "after-quit", "x"))
		raw.expect(`"OK"`)
		raw.expectClosed()
		if _, ok := srv.Store.Get([]byte("after-quit")); ok {
			t.Fatal("command after QUIT was executed")
		}
	})
	t.Run("client", func(t *testing.T) {
		conn := rdb.Conn()
		defer conn.Close()
		if err := conn.ClientGetName(c).Err(); err != redis.Nil {
			t.Fatalf("CLIENT GETNAME before SETNAME: %v, want nil", err)
		}
		if err := conn.ClientSetName(c, "worker-1").Err(); err != nil {
			t.Fatal(err)
		}
		if name, err := conn.ClientGetName(c).Result(); err != nil || name != "worker-1" {
			t.Fatalf("CLIENT GETNAME = %q, %v", name, err)
		}
		wantErr(t, conn.Do(c, "CLIENT", "SETNAME", "has space").Err(),
			"ERR Client names cannot contain spaces, newlines or special characters.")
		id, err := conn.ClientID(c).Result()
		if err != nil || id <= 0 {
			t.Fatalf("CLIENT ID = %d, %v", id, err)
		}
		// go-redis sent CLIENT SETINFO lib-name and lib-ver when it connected.
		info, err := conn.ClientInfo(c).Result()
		if err != nil {
			t.Fatal(err)
		}
		if info.ID != id || info.Name != "worker-1" || info.LibName == "" || info.LibVer != redis.Version() {
			t.Fatalf("CLIENT INFO = %+v, want id %d, name worker-1, go-redis's lib-name and lib-ver", info, id)
		}
		if err := conn.Do(c, "CLIENT", "SETINFO", "LIB-NAME", "mylib").Err(); err != nil {
			t.Fatal(err)
		}
		wantErr(t, conn.Do(c, "CLIENT", "SETINFO", "lib-color", "red").Err(), "ERR Unrecognized option 'lib-color'")
		wantErr(t, conn.Do(c, "CLIENT", "SETINFO", "lib-ver", "1 2").Err(),
			"ERR lib-name and lib-ver cannot contain spaces, newlines or special characters.")
		list, err := conn.ClientList(c).Result()
		if err != nil {
			t.Fatal(err)
		}
		mine := "id=" + strconv.FormatInt(id, 10) + " "
		var line string
		for _, l := range strings.Split(strings.TrimSpace(list), "\n") {
			if strings.HasPrefix(l, mine) {
				line = l
			}
		}
		if !strings.Contains(line, " name=worker-1 ") || !strings.Contains(line, " lib-name=mylib ") {
			t.Fatalf("CLIENT LIST has no line for this connection with its name and lib-name:\n%s", list)
		}
		wantErr(t, conn.Do(c, "CLIENT", "GETNAME", "x").Err(), "ERR wrong number of arguments for 'client|getname' command")
		wantErr(t, conn.Do(c, "CLIENT", "KILL", "x").Err(), "ERR No such client")
		wantErr(t, conn.Do(c, "CLIENT", "BOGUS").Err(), "ERR unknown subcommand 'BOGUS'. Try CLIENT HELP.")
		wantErr(t, conn.Do(c, "CLIENT").Err(), "ERR wrong number of arguments for 'client' command")
	})
}

// TestAdminCommands covers COMMAND, INFO, DBSIZE and the flushes.
func TestAdminCommands(t *testing.T) {
	srv := start(t, server.Config{})
	rdb := newClient(t, srv.Addr, nil)
	c := ctx(t)

	t.Run("command", func(t *testing.T) {
		all, err := rdb.Command(c).Result()
		if err != nil {
			t.Fatal(err)
		}
		n, err := rdb.Do(c, "COMMAND", "COUNT").Int64()
		if err != nil || int(n) != len(all) {
			t.Fatalf("COMMAND COUNT = %d, %v; COMMAND lists %d", n, err, len(all))
		}
		get := all["get"]
		if get == nil || get.Arity != 2 || !get.ReadOnly || get.FirstKeyPos != 1 || get.LastKeyPos != 1 || get.StepCount != 1 {
			t.Fatalf("COMMAND get = %+v", get)
		}
		mset := all["mset"]
		if mset == nil || mset.Arity != -3 || !slices.Contains(mset.Flags, "write") || mset.LastKeyPos != -1 || mset.StepCount != 2 {
			t.Fatalf("COMMAND mset = %+v", mset)
		}
		for _, name := range []string{"ping", "hello", "auth", "set", "range", "cas", "swap", "info", "client"} {
			if all[name] == nil {
				t.Errorf("COMMAND does not list %s", name)
			}
		}
		info, err := rdb.Do(c, "COMMAND", "INFO", "get", "nosuch").Slice()
		if err != nil || len(info) != 2 || info[1] != nil {
			t.Fatalf("COMMAND INFO get nosuch = %#v, %v", info, err)
		}
		if desc, ok := info[0].([]any); !ok || len(desc) != 10 || desc[0] != "get" || desc[1] != int64(2) {
			t.Fatalf("COMMAND INFO get = %#v", info[0])
		}
		if err := rdb.Do(c, "COMMAND", "DOCS").Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.Do(c, "command", "docs", "get").Err(); err != nil {
			t.Fatal(err)
		}
		wantErr(t, rdb.Do(c, "COMMAND", "FOO").Err(), "ERR unknown subcommand 'FOO'. Try COMMAND HELP.")
	})
	t.Run("info", func(t *testing.T) {
		if err := rdb.FlushAll(c).Err(); err != nil {
			t.Fatal(err)
		}
		info, err := rdb.Info(c).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, sec := range []string{"# Server\r\n", "# Clients\r\n", "# Memory\r\n", "# Stats\r\n", "# Keyspace\r\n",
			"redis_version:", "connected_clients:", "used_memory:", "total_commands_processed:"} {
			if !strings.Contains(info, sec) {
				t.Errorf("INFO lacks %q:\n%s", sec, info)
			}
		}
		if strings.Contains(info, "db0:") {
			t.Errorf("INFO of an empty store shows a keyspace:\n%s", info)
		}
		// The runtime's metrics behind INFO memory exist in this Go (a
		// missing one would read as 0) and add up as MemStats's would.
		mem := infoFields(info, "used_memory", "used_memory_heap", "used_memory_sys")
		if !(0 < mem[0] && mem[0] <= mem[1] && mem[1] <= mem[2]) {
			t.Errorf("INFO memory: used_memory %d, used_memory_heap %d, used_memory_sys %d; want 0 < each <= the next", mem[0], mem[1], mem[2])
		}
		if err := rdb.MSet(c, "i1", "a", "i2", "b", "i3", "c").Err(); err != nil {
			t.Fatal(err)
		}
		ks, err := rdb.Info(c, "keyspace").Result()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(ks, "db0:keys=3,") || strings.Contains(ks, "# Server") {
			t.Fatalf("INFO keyspace = %q, want only the keyspace with 3 keys", ks)
		}
		two, err := rdb.Info(c, "server", "STATS").Result()
		if err != nil || !strings.Contains(two, "# Server") || !strings.Contains(two, "# Stats") || strings.Contains(two, "# Memory") {
			t.Fatalf("INFO server stats = %q, %v", two, err)
		}
		if everything, err := rdb.Info(c, "everything").Result(); err != nil || !strings.Contains(everything, "# Keyspace") {
			t.Fatalf("INFO everything = %q, %v", everything, err)
		}
	})
	t.Run("time and config", func(t *testing.T) {
		before := time.Now()
		now, err := rdb.Time(c).Result()
		if err != nil || now.Before(before.Add(-time.Second)) || now.After(time.Now().Add(time.Second)) {
			t.Fatalf("TIME = %v, %v; the test's clock says %v", now, err, before)
		}
		got, err := rdb.ConfigGet(c, "save").Result()
		if err != nil || len(got) != 1 || got["save"] != "" {
			t.Fatalf("CONFIG GET save = %v, %v", got, err)
		}
		got, err = rdb.ConfigGet(c, "MAX*").Result()
		if err != nil || got["maxclients"] == "" || got["maxmemory"] != "0" || got["maxmemory-policy"] != "noeviction" || len(got) != 3 {
			t.Fatalf("CONFIG GET MAX* = %v, %v", got, err)
		}
		if got, err = rdb.ConfigGet(c, "nothing*").Result(); err != nil || len(got) != 0 {
			t.Fatalf("CONFIG GET of no parameter = %v, %v", got, err)
		}
		wantErr(t, rdb.ConfigSet(c, "maxmemory", "1").Err(), "ERR CONFIG SET failed (possibly related to argument 'maxmemory') - can't set immutable config")
		wantErr(t, rdb.Do(c, "CONFIG", "GET").Err(), "ERR wrong number of arguments for 'config|get' command")
		wantErr(t, rdb.Do(c, "CONFIG", "NOSUCH").Err(), "ERR unknown subcommand 'NOSUCH'. Try CONFIG HELP.")
	})
	t.Run("cluster mode off", func(t *testing.T) {
		for _, cmd := range [][]any{{"CLUSTER", "INFO"}, {"CLUSTER", "KEYSLOT", "k"}, {"CLUSTER", "NOSUCH"},
			{"READONLY"}, {"READWRITE"}, {"ASKING"}} {
			wantErr(t, rdb.Do(c, cmd...).Err(), "ERR This instance has cluster support disabled")
		}
	})
	t.Run("help", func(t *testing.T) {
		// The subcommands each HELP lists are the ones the server knows.
		for _, tc := range []struct {
			cmd  string
			subs []string
		}{
			{"CLIENT", []string{"GETNAME", "ID", "INFO", "KILL", "KILL", "LIST", "UNPAUSE", "PAUSE", "REPLY", "SETINFO", "SETNAME", "NO-EVICT", "HELP"}},
			{"COMMAND", []string{"COUNT", "LIST", "INFO", "DOCS", "GETKEYS", "GETKEYSANDFLAGS", "HELP"}},
			{"CONFIG", []string{"GET", "SET", "RESETSTAT", "HELP"}},
			{"SLOWLOG", []string{"GET", "LEN", "RESET", "HELP"}},
			{"MEMORY", []string{"USAGE", "HELP"}},
		} {
			lines, err := rdb.Do(c, tc.cmd, "HELP").StringSlice()
			if err != nil || len(lines) == 0 || !strings.HasPrefix(lines[0], tc.cmd+" <subcommand>") {
				t.Fatalf("%s HELP = %q, %v", tc.cmd, lines, err)
			}
			var subs []string
			for _, l := range lines[1:] {
				if !strings.HasPrefix(l, " ") && !strings.HasPrefix(l, "(") {
					subs = append(subs, strings.Fields(l)[0])
				}
			}
			if !slices.Equal(subs, tc.subs) {
				t.Fatalf("%s HELP lists %v, want %v", tc.cmd, subs, tc.subs)
			}
			for _, sub := range subs[:len(subs)-1] {
				if err := rdb.Do(c, tc.cmd, sub).Err(); err != nil && strings.Contains(err.Error(), "unknown subcommand") {
					t.Errorf("%s HELP lists %s, which the server does not know: %v", tc.cmd, sub, err)
				}
			}
		}
	})
	t.Run("dbsize and flushes", func(t *testing.T) {
		rdb.FlushDB(c)
		if n, err := rdb.DBSize(c).Result(); err != nil || n != 0 {
			t.Fatalf("DBSIZE after FLUSHDB = %d, %v", n, err)
		}
		rdb.MSet(c, "a", "1", "b", "2")
		if n, err := rdb.DBSize(c).Result(); err != nil || n != 2 {
			t.Fatalf("DBSIZE = %d, %v", n, err)
		}
		if err := rdb.FlushDB(c).Err(); err != nil {
			t.Fatal(err)
		}
		if n := rdb.DBSize(c).Val(); n != 0 {
			t.Fatalf("DBSIZE after FLUSHDB = %d", n)
		}
		rdb.Set(c, "a", "1", 0)
		if err := rdb.FlushAll(c).Err(); err != nil {
			t.Fatal(err)
		}
		if n := rdb.DBSize(c).Val(); n != 0 {
			t.Fatalf("DBSIZE after FLUSHALL = %d", n)
		}
		rdb.Set(c, "a", "1", 0)
		if err := rdb.FlushDBAsync(c).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.Do(c, "FLUSHALL", "SYNC").Err(); err != nil {
			t.Fatal(err)
		}
		if n := rdb.DBSize(c).Val(); n != 0 {
			t.Fatalf("DBSIZE after FLUSHDB ASYNC = %d", n)
		}
		wantErr(t, rdb.Do(c, "FLUSHDB", "LATER").Err(), "ERR syntax error")
		wantErr(t, rdb.Do(c, "DBSIZE", "x").Err(), "ERR wrong number of arguments for 'dbsize' command")
	})
}

// TestStringCommands covers every key command, through go-redis.
func TestStringCommands(t *testing.T) {
	srv := start(t, server.Config{})
	rdb := newClient(t, srv.Addr, nil)
	c := ctx(t)

	t.Run("get set", func(t *testing.T) {
		if err := rdb.Get(c, "gs:missing").Err(); err != redis.Nil {
			t.Fatalf("GET missing: %v", err)
		}
		if err := rdb.Set(c, "gs:k", "v1", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if v, err := rdb.Get(c, "gs:k").Result(); err != nil || v != "v1" {
			t.Fatalf("GET = %q, %v", v, err)
		}
		if err := rdb.Set(c, "gs:empty", "", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if v, err := rdb.Get(c, "gs:empty").Result(); err != nil || v != "" {
			t.Fatalf("GET empty = %q, %v", v, err)
		}
	})
	t.Run("set options", func(t *testing.T) {
		// NX: only if absent.
		if err := rdb.SetArgs(c, "so:k", "a", redis.SetArgs{Mode: "NX"}).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.SetArgs(c, "so:k", "b", redis.SetArgs{Mode: "NX"}).Err(); err != redis.Nil {
			t.Fatalf("SET NX on existing key: %v, want nil", err)
		}
		// XX: only if present.
		if err := rdb.SetArgs(c, "so:absent", "x", redis.SetArgs{Mode: "XX"}).Err(); err != redis.Nil {
			t.Fatalf("SET XX on missing key: %v, want nil", err)
		}
		if err := rdb.SetArgs(c, "so:k", "c", redis.SetArgs{Mode: "XX"}).Err(); err != nil {
			t.Fatal(err)
		}
		if v := rdb.Get(c, "so:k").Val(); v != "c" {
			t.Fatalf("after SET XX: %q", v)
		}
		if n := rdb.Exists(c, "so:absent").Val(); n != 0 {
			t.Fatal("SET XX created a key")
		}
		// GET: the old value, or nil.
		if old, err := rdb.SetArgs(c, "so:k", "d", redis.SetArgs{Get: true}).Result(); err != nil || old != "c" {
			t.Fatalf("SET GET = %q, %v", old, err)
		}
		if err := rdb.SetArgs(c, "so:new", "d", redis.SetArgs{Get: true}).Err(); err != redis.Nil {
			t.Fatalf("SET GET on new key: %v, want nil", err)
		}
		if v := rdb.Get(c, "so:new").Val(); v != "d" {
			t.Fatalf("SET GET did not set: %q", v)
		}
		// NX GET on an existing key: not written, old value returned.
		if old, err := rdb.Do(c, "SET", "so:k", "e", "NX", "GET").Text(); err != nil || old != "d" {
			t.Fatalf("SET NX GET = %q, %v", old, err)
		}
		if v := rdb.Get(c, "so:k").Val(); v != "d" {
			t.Fatalf("SET NX GET overwrote: %q", v)
		}
		wantErr(t, rdb.Do(c, "SET", "so:k", "v", "NX", "XX").Err(), "ERR syntax error")
		wantErr(t, rdb.Do(c, "SET", "so:k", "v", "SOMETIMES").Err(), "ERR syntax error")
		// An invalid expiry is refused, and nothing is written.
		if err := rdb.Set(c, "so:k", "kept", 0).Err(); err != nil {
			t.Fatal(err)
		}
		wantErr(t, rdb.Do(c, "set", "so:k", "ttl", "ex", "0").Err(), "ERR invalid expire time in 'set' command")
		wantErr(t, rdb.Do(c, "set", "so:k", "ttl", "px", "1", "keepttl").Err(), "ERR syntax error")
		wantErr(t, rdb.Do(c, "SET", "so:k", "ttl", "PX").Err(), "ERR syntax error") // no time
		if v := rdb.Get(c, "so:k").Val(); v != "kept" {
			t.Fatalf("refused SET EX wrote the key: %q", v)
		}
		wantErr(t, rdb.Do(c, "SET", "so:k").Err(), "ERR wrong number of arguments for 'set' command")
	})
	t.Run("getset setnx swap cas", func(t *testing.T) {
		if err := rdb.Do(c, "GETSET", "gx:k", "1").Err(); err != redis.Nil {
			t.Fatalf("GETSET new key: %v", err)
		}
		if old, err := rdb.Do(c, "GETSET", "gx:k", "2").Text(); err != nil || old != "1" {
			t.Fatalf("GETSET = %q, %v", old, err)
		}
		if ok, err := rdb.SetNX(c, "gx:nx", "a", 0).Result(); err != nil || !ok {
			t.Fatalf("SETNX new = %v, %v", ok, err)
		}
		if ok, err := rdb.SetNX(c, "gx:nx", "b", 0).Result(); err != nil || ok {
			t.Fatalf("SETNX existing = %v, %v", ok, err)
		}
		if v := rdb.Get(c, "gx:nx").Val(); v != "a" {
			t.Fatalf("SETNX overwrote: %q", v)
		}
		if err := rdb.Do(c, "SWAP", "gx:sw", "x").Err(); err != redis.Nil {
			t.Fatalf("SWAP new key: %v", err)
		}
		if old, err := rdb.Do(c, "swap", "gx:sw", "y").Text(); err != nil || old != "x" {
			t.Fatalf("SWAP = %q, %v", old, err)
		}
		if n, err := rdb.Do(c, "CAS", "gx:sw", "wrong", "z").Int(); err != nil || n != 0 {
			t.Fatalf("CAS mismatch = %d, %v", n, err)
		}
		if n, err := rdb.Do(c, "CAS", "gx:sw", "y", "z").Int(); err != nil || n != 1 {
			t.Fatalf("CAS match = %d, %v", n, err)
		}
		if v := rdb.Get(c, "gx:sw").Val(); v != "z" {
			t.Fatalf("after CAS: %q", v)
		}
		if n, err := rdb.Do(c, "CAS", "gx:none", "", "z").Int(); err != nil || n != 0 {
			t.Fatalf("CAS on a missing key = %d, %v", n, err)
		}
		if rdb.Exists(c, "gx:none").Val() != 0 {
			t.Fatal("CAS created a missing key")
		}
		wantErr(t, rdb.Do(c, "CAS", "gx:sw", "z").Err(), "ERR wrong number of arguments for 'cas' command")
	})
	t.Run("mget mset msetnx", func(t *testing.T) {
		if err := rdb.MSet(c, "m:a", "1", "m:b", "2", "m:c", "3").Err(); err != nil {
			t.Fatal(err)
		}
		vals, err := rdb.MGet(c, "m:a", "m:missing", "m:c", "m:a").Result()
		if err != nil || !slices.Equal(vals, []any{"1", nil, "3", "1"}) {
			t.Fatalf("MGET = %#v, %v", vals, err)
		}
		// A key given twice: the last value wins, as in Redis.
		rdb.MSet(c, "m:dup", "first", "m:dup", "second")
		if v := rdb.Get(c, "m:dup").Val(); v != "second" {
			t.Fatalf("MSET repeated key = %q", v)
		}
		wantErr(t, rdb.Do(c, "MSET", "m:a", "1", "m:b").Err(), "ERR wrong number of arguments for 'mset' command")
		wantErr(t, rdb.Do(c, "MSET", "m:a").Err(), "ERR wrong number of arguments for 'mset' command")
		if v := rdb.Get(c, "m:b").Val(); v != "2" {
			t.Fatalf("MSET with odd arguments wrote: m:b = %q", v)
		}
		// MSETNX: all or nothing.
		if ok, err := rdb.MSetNX(c, "m:x", "1", "m:y", "2").Result(); err != nil || !ok {
			t.Fatalf("MSETNX new = %v, %v", ok, err)
		}
		if ok, err := rdb.MSetNX(c, "m:z", "1", "m:x", "9").Result(); err != nil || ok {
			t.Fatalf("MSETNX with one existing = %v, %v", ok, err)
		}
		if n := rdb.Exists(c, "m:z").Val(); n != 0 {
			t.Fatal("MSETNX that failed wrote m:z")
		}
		if v := rdb.Get(c, "m:x").Val(); v != "1" {
			t.Fatalf("MSETNX that failed overwrote m:x: %q", v)
		}
		wantErr(t, rdb.Do(c, "MSETNX", "m:q", "1", "m:r").Err(), "ERR wrong number of arguments for 'msetnx' command")
		wantErr(t, rdb.Do(c, "MGET").Err(), "ERR wrong number of arguments for 'mget' command")
	})
	t.Run("del exists", func(t *testing.T) {
		rdb.MSet(c, "d:a", "1", "d:b", "2", "d:c", "3")
		if n, err := rdb.Exists(c, "d:a", "d:a", "d:missing", "d:b").Result(); err != nil || n != 3 {
			t.Fatalf("EXISTS with a repeated key = %d, %v; want 3", n, err)
		}
		if n, err := rdb.Del(c, "d:a", "d:b", "d:missing", "d:a").Result(); err != nil || n != 2 {
			t.Fatalf("DEL = %d, %v; want 2", n, err)
		}
		if n := rdb.Exists(c, "d:a", "d:b", "d:c").Val(); n != 1 {
			t.Fatalf("EXISTS after DEL = %d", n)
		}
		wantErr(t, rdb.Do(c, "DEL").Err(), "ERR wrong number of arguments for 'del' command")
		if n, err := rdb.Touch(c, "d:c", "d:c", "d:missing").Result(); err != nil || n != 2 {
			t.Fatalf("TOUCH = %d, %v; want 2", n, err)
		}
		if typ, err := rdb.Type(c, "d:c").Result(); err != nil || typ != "string" {
			t.Fatalf("TYPE of a key = %q, %v", typ, err)
		}
		if typ, err := rdb.Type(c, "d:missing").Result(); err != nil || typ != "none" {
			t.Fatalf("TYPE of a missing key = %q, %v", typ, err)
		}
		if n, err := rdb.Unlink(c, "d:c", "d:missing").Result(); err != nil || n != 1 {
			t.Fatalf("UNLINK = %d, %v; want 1", n, err)
		}
		if n := rdb.Exists(c, "d:c").Val(); n != 0 {
			t.Fatalf("EXISTS after UNLINK = %d", n)
		}
	})
	t.Run("incr decr", func(t *testing.T) {
		if n, err := rdb.Incr(c, "n:a").Result(); err != nil || n != 1 {
			t.Fatalf("INCR new = %d, %v", n, err)
		}
		if n, err := rdb.IncrBy(c, "n:a", 41).Result(); err != nil || n != 42 {
			t.Fatalf("INCRBY = %d, %v", n, err)
		}
		if n, err := rdb.Decr(c, "n:a").Result(); err != nil || n != 41 {
			t.Fatalf("DECR = %d, %v", n, err)
		}
		if n, err := rdb.DecrBy(c, "n:a", 50).Result(); err != nil || n != -9 {
			t.Fatalf("DECRBY = %d, %v", n, err)
		}
		if v := rdb.Get(c, "n:a").Val(); v != "-9" {
			t.Fatalf("stored counter = %q", v)
		}
		if n, err := rdb.Decr(c, "n:new").Result(); err != nil || n != -1 {
			t.Fatalf("DECR new = %d, %v", n, err)
		}
		const notInt = "ERR value is not an integer or out of range"
		for _, v := range []string{"abc", "", " 1", "1 ", "01", "+1", "-0", "1.5", "99999999999999999999"} {
			rdb.Set(c, "n:bad", v, 0)
			wantErr(t, rdb.Incr(c, "n:bad").Err(), notInt)
			if got := rdb.Get(c, "n:bad").Val(); got != v {
				t.Fatalf("failed INCR changed %q to %q", v, got)
			}
		}
		wantErr(t, rdb.Do(c, "INCRBY", "n:a", "x").Err(), notInt)
		wantErr(t, rdb.Do(c, "INCRBY", "n:a", "1.0").Err(), notInt)
		wantErr(t, rdb.Do(c, "DECRBY", "n:a", "").Err(), notInt)

		const overflow = "ERR increment or decrement would overflow"
		rdb.Set(c, "n:max", strconv.FormatInt(1<<63-1, 10), 0)
		wantErr(t, rdb.Incr(c, "n:max").Err(), overflow)
		wantErr(t, rdb.IncrBy(c, "n:max", 1<<62).Err(), overflow)
		rdb.Set(c, "n:min", strconv.FormatInt(-1<<63, 10), 0)
		wantErr(t, rdb.Decr(c, "n:min").Err(), overflow)
		wantErr(t, rdb.DecrBy(c, "n:min", 1).Err(), overflow)
		if n, err := rdb.IncrBy(c, "n:min", 1<<63-1).Result(); err != nil || n != -1 {
			t.Fatalf("INCRBY max+min = %d, %v", n, err)
		}
		// DECRBY by the smallest int64 cannot be negated.
		rdb.Set(c, "n:zero", "0", 0)
		wantErr(t, rdb.DecrBy(c, "n:zero", -1<<63).Err(), "ERR decrement would overflow")
		if n, err := rdb.IncrBy(c, "n:zero", -1<<63).Result(); err != nil || n != -1<<63 {
			t.Fatalf("INCRBY min int64 = %d, %v", n, err)
		}
		wantErr(t, rdb.Do(c, "INCR").Err(), "ERR wrong number of arguments for 'incr' command")
	})
	t.Run("append strlen", func(t *testing.T) {
		if n, err := rdb.StrLen(c, "s:missing").Result(); err != nil || n != 0 {
			t.Fatalf("STRLEN missing = %d, %v", n, err)
		}
		if n, err := rdb.Append(c, "s:a", "hello").Result(); err != nil || n != 5 {
			t.Fatalf("APPEND new = %d, %v", n, err)
		}
		if n, err := rdb.Append(c, "s:a", " world").Result(); err != nil || n != 11 {
			t.Fatalf("APPEND = %d, %v", n, err)
		}
		if n, err := rdb.StrLen(c, "s:a").Result(); err != nil || n != 11 {
			t.Fatalf("STRLEN = %d, %v", n, err)
		}
		if v := rdb.Get(c, "s:a").Val(); v != "hello world" {
			t.Fatalf("after APPEND: %q", v)
		}
		// APPEND to a counter makes it a string; INCR then refuses it.
		rdb.Set(c, "s:n", "12", 0)
		rdb.Append(c, "s:n", "3")
		if n, err := rdb.Incr(c, "s:n").Result(); err != nil || n != 124 {
			t.Fatalf("INCR after APPEND = %d, %v", n, err)
		}
		rdb.Append(c, "s:n", "x")
		wantErr(t, rdb.Incr(c, "s:n").Err(), "ERR value is not an integer or out of range")
	})
	t.Run("range", func(t *testing.T) {
		rdb.FlushAll(c)
		for _, k := range []string{"a", "b", "c", "d", "e"} {
			rdb.Set(c, k, "v"+k, 0)
		}
		rangeIs(t, rdb.Do(c, "RANGE", "b", "d"), "b", "vb", "c", "vc", "d", "vd")
		rangeIs(t, rdb.Do(c, "RANGE", "a", "e", "LIMIT", "2"), "a", "va", "b", "vb")
		rangeIs(t, rdb.Do(c, "range", "bb", "dd", "limit", "10"), "c", "vc", "d", "vd")
		rangeIs(t, rdb.Do(c, "RANGE", "a", "e", "LIMIT", "0"))
		rangeIs(t, rdb.Do(c, "RANGE", "d", "b"))
		rangeIs(t, rdb.Do(c, "RANGE", "c", "c"), "c", "vc")
		rangeIs(t, rdb.Do(c, "RANGE", "", "\xff"), "a", "va", "b", "vb", "c", "vc", "d", "vd", "e", "ve")
		wantErr(t, rdb.Do(c, "RANGE", "a", "e", "LIMIT", "-1").Err(), "ERR LIMIT must be a non-negative integer")
		wantErr(t, rdb.Do(c, "RANGE", "a", "e", "LIMIT", "x").Err(), "ERR LIMIT must be a non-negative integer")
		wantErr(t, rdb.Do(c, "RANGE", "a", "e", "LIMIT").Err(), "ERR syntax error")
		wantErr(t, rdb.Do(c, "RANGE", "a", "e", "TOP", "3").Err(), "ERR syntax error")
		wantErr(t, rdb.Do(c, "RANGE", "a").Err(), "ERR wrong number of arguments for 'range' command")

		// Keys compare as bytes: unsigned, shorter prefix first, spread over
		// every stripe of the store.
		rdb.FlushAll(c)
		want := []string{"\x00", "\x00\x00", "\x01", "A", "Z", "a", "a\x00", "ab", "\x7f", "\x80", "\xc3\xa9", "\xff", "\xff\xff"}
		for i, k := range want {
			rdb.Set(c, k, strconv.Itoa(i), 0)
		}
		for i := range 300 {
			k := "many:" + strconv.Itoa(1000+i)
			want = append(want, k)
			rdb.Set(c, k, k, 0)
		}
		slices.Sort(want)
		got, err := rdb.Do(c, "RANGE", "", "\xff\xff\xff").StringSlice()
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for i := 0; i < len(got); i += 2 {
			keys = append(keys, got[i])
		}
		if !slices.Equal(keys, want) {
			t.Fatalf("RANGE keys are not in byte order:\n got %q\nwant %q", keys, want)
		}
		page, _ := rdb.Do(c, "RANGE", "many:1100", "many:2000", "LIMIT", "5").StringSlice()
		wantPage := []string{"many:1100", "many:1100", "many:1101", "many:1101", "many:1102", "many:1102",
			"many:1103", "many:1103", "many:1104", "many:1104"}
		if !slices.Equal(page, wantPage) {
			t.Fatalf("RANGE LIMIT across stripes = %q", page)
		}
	})
	t.Run("binary safety", func(t *testing.T) {
		all := make([]byte, 256)
		for i := range all {
			all[i] = byte(i)
		}
		key := "bin:" + string(all)
		val := string(all) + "\r\n$5\r\nfalse\r\n*1\r\n" + string(all)
		if err := rdb.Set(c, key, val, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if v, err := rdb.Get(c, key).Result(); err != nil || v != val {
			t.Fatalf("GET binary = %q, %v", v, err)
		}
		crlfKey := "bin:\r\nGET x\r\n"
		rdb.Set(c, crlfKey, "\r\n", 0)
		vals, err := rdb.MGet(c, key, crlfKey).Result()
		if err != nil || vals[0] != val || vals[1] != "\r\n" {
			t.Fatalf("MGET binary = %q, %v", vals, err)
		}
		if n := rdb.Exists(c, key, crlfKey, "bin:\r\n").Val(); n != 2 {
			t.Fatalf("EXISTS binary = %d", n)
		}
		if n := rdb.Append(c, key, "\x00").Val(); n != int64(len(val)+1) {
			t.Fatalf("APPEND binary = %d", n)
		}
		got, err := rdb.Do(c, "RANGE", "bin:", "bin:\xff").StringSlice()
		if err != nil || !slices.Equal(got, []string{key, val + "\x00", crlfKey, "\r\n"}) {
			t.Fatalf("RANGE binary = %q, %v", got, err)
		}
		// Each single byte as a key and as a value.
		pipe := rdb.Pipeline()
		for _, b := range all {
			pipe.Set(c, "byte:"+string(b), []byte{b}, 0)
		}
		gets := make([]*redis.StringCmd, 256)
		for i, b := range all {
			gets[i] = pipe.Get(c, "byte:"+string(b))
		}
		if _, err := pipe.Exec(c); err != nil {
			t.Fatal(err)
		}
		for i, g := range gets {
			if v, err := g.Bytes(); err != nil || !bytes.Equal(v, []byte{byte(i)}) {
				t.Fatalf("byte %d: %q, %v", i, v, err)
			}
		}
		if v, ok := srv.Store.Get([]byte(key)); !ok || string(v) != val+"\x00" {
			t.Fatal("the store does not hold the binary value as sent")
		}
	})
}

// rangeIs checks a RANGE reply against key, value, key, value, ...
func rangeIs(t *testing.T, cmd *redis.Cmd, want ...string) {
	t.Helper()
	got, err := cmd.StringSlice()
	if err != nil {
		t.Fatalf("%v: %v", cmd.Args(), err)
	}
	if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
		t.Fatalf("%v = %q, want %q", cmd.Args(), got, want)
	}
}

// TestCommandErrors covers unknown, unsupported and malformed commands.
func TestCommandErrors(t *testing.T) {
	srv := start(t, server.Config{})
	rdb := newClient(t, srv.Addr, nil)
	c := ctx(t)

	wantErr(t, rdb.Do(c, "foo", "a", "b").Err(), "ERR unknown command 'foo', with args beginning with: 'a' 'b' ")
	wantErr(t, rdb.Do(c, "FOO").Err(), "ERR unknown command 'FOO', with args beginning with: ")
	wantErr(t, rdb.Do(c, "COMMAND", "COUNT", "x").Err(), "ERR wrong number of arguments for 'command|count' command")
	// As Redis 7: the quoted arguments stop once 128 bytes are listed, and
	// each is cut to what is left of those 128.
	long := strings.Repeat("x", 200)
	wantErr(t, rdb.Do(c, "nope", long).Err(),
		"ERR unknown command 'nope', with args beginning with: '"+long[:128]+"' ")
	wantErr(t, rdb.Do(c, "nope", "abcdefghij", long, "z").Err(),
		"ERR unknown command 'nope', with args beginning with: 'abcdefghij' '"+long[:115]+"' ")

	for _, tc := range [][]any{{"GET"}, {"GET", "a", "b"}, {"SET", "a"}, {"STRLEN"}, {"APPEND", "a"}, {"getset", "a"}, {"EXISTS"}} {
		name := strings.ToLower(tc[0].(string))
		wantErr(t, rdb.Do(c, tc...).Err(), "ERR wrong number of arguments for '"+name+"' command")
	}

	wantErr(t, rdb.Do(c, "LPUSH", "l", "a").Err(), "ERR 'lpush' is not supported: Flint stores only string values")
	wantErr(t, rdb.Do(c, "hset", "h", "f", "v").Err(), "ERR 'hset' is not supported: Flint stores only string values")

	// Names are case-insensitive, commands and subcommands alike.
	if err := rdb.Do(c, "sEt", "case", "v").Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := rdb.Do(c, "GeT", "case").Text(); err != nil || v != "v" {
		t.Fatalf("GeT = %q, %v", v, err)
	}
	if v, err := rdb.Do(c, "MgEt", "case").StringSlice(); err != nil || !slices.Equal(v, []string{"v"}) {
		t.Fatalf("MgEt = %q, %v", v, err)
	}
	if err := rdb.Do(c, "Client", "SetName", "x").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := rdb.Do(c, "command", "Count").Int(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Do(c, "SET", "case", "v", "nx", "Get").Err(); err != nil {
		t.Fatal(err)
	}
	wantErr(t, rdb.Do(c, "LpUsH", "l", "a").Err(), "ERR 'lpush' is not supported: Flint stores only string values")
	// A name longer than the server's scratch buffer is still found.
	wantErr(t, rdb.Do(c, strings.Repeat("GET", 20)).Err(), "ERR unknown command '"+strings.Repeat("GET", 20)+"', with args beginning with: ")

	// Errors do not disturb the connection: the next command works.
	if got := rdb.Ping(c).Val(); got != "PONG" {
		t.Fatalf("PING after errors = %q", got)
	}
}

// infoFields returns the values of INFO's integer fields names, in order,
// or -1 for one INFO lacks.
func infoFields(info string, names ...string) []int64 {
	vals := make([]int64, len(names))
	for i, name := range names {
		vals[i] = -1
		for line := range strings.Lines(info) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
				if n, err := strconv.ParseInt(v, 10, 64); err == nil {
					vals[i] = n
				}
			}
		}
	}
	return vals
}
