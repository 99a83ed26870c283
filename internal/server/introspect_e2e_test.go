package server_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flintkv/flint/internal/server"
	"github.com/flintkv/flint/internal/server/servertest"
	"github.com/flintkv/flint/internal/store"
)

// parseInfo parses INFO's text as redis-py's parse_info does: sections
// by their "# Name" lines, fields name:value, and a value of k=v pairs
// (commandstats, keyspace) into a map. It fails the test on a line that
// redis-py would not read.
func parseInfo(t *testing.T, text string) (sections []string, fields map[string]string, pairs map[string]map[string]string) {
	t.Helper()
	fields, pairs = map[string]string{}, map[string]map[string]string{}
	if !strings.HasSuffix(text, "\r\n") {
		t.Fatalf("INFO does not end in CRLF: %q", text)
	}
	for _, line := range strings.Split(strings.TrimSuffix(text, "\r\n"), "\r\n") {
		switch {
		case line == "":
		case strings.HasPrefix(line, "# "):
			sections = append(sections, line[2:])
		default:
			k, v, ok := strings.Cut(line, ":")
			if !ok || k == "" || strings.ContainsAny(k, " ,=") {
				t.Fatalf("INFO line %q is not name:value", line)
			}
			fields[k] = v
			if strings.Contains(v, "=") {
				pairs[k] = map[string]string{}
				for _, kv := range strings.Split(v, ",") {
					a, b, ok := strings.Cut(kv, "=")
					if !ok {
						t.Fatalf("INFO line %q: %q is not k=v", line, kv)
					}
					pairs[k][a] = b
				}
			}
		}
	}
	return sections, fields, pairs
}

// TestInfoRedis7 checks INFO's sections against Redis 7.0's order and the
// fields clients read, and the counts of commandstats and errorstats.
func TestInfoRedis7(t *testing.T) {
	srv := start(t, server.Config{})
	rdb := newClient(t, srv.Addr, &redis.Options{Protocol: 2})
	c := ctx(t)
	info := func(args ...string) string {
		t.Helper()
		s, err := rdb.Info(c, args...).Result()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	dflt := []string{"Server", "Clients", "Memory", "Persistence", "Stats", "Replication", "CPU", "Modules", "Errorstats", "Cluster", "Keyspace"}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, dflt},
		{[]string{"default"}, dflt},
		{[]string{"all"}, slices.Concat(dflt[:8], []string{"Commandstats"}, dflt[8:])},
		{[]string{"everything"}, slices.Concat(dflt[:8], []string{"Commandstats"}, dflt[8:])},
		{[]string{"CPU", "keyspace", "nosuch"}, []string{"CPU", "Keyspace"}},
	} {
		if got, _, _ := parseInfo(t, info(tc.args...)); !slices.Equal(got, tc.want) {
			t.Errorf("INFO %v sections %v, want %v", tc.args, got, tc.want)
		}
	}

	rdb.Set(c, "n", "x", 0)
	for range 3 {
		rdb.Get(c, "n")
	}
	wantErr(t, rdb.Incr(c, "n").Err(), "ERR value is not an integer or out of range")
	wantErr(t, rdb.Do(c, "GET").Err(), "ERR wrong number of arguments for 'get' command")
	wantErr(t, rdb.Do(c, "CLIENT", "SETNAME", "a b").Err(), "ERR Client names cannot contain spaces, newlines or special characters.")
	_, fields, pairs := parseInfo(t, info("everything"))
	for _, f := range []string{"redis_version", "redis_mode", "process_id", "run_id", "tcp_port", "uptime_in_seconds",
		"connected_clients", "maxclients", "used_memory", "used_memory_human", "maxmemory_policy", "rdb_last_save_time",
		"aof_enabled", "total_connections_received", "total_commands_processed", "keyspace_hits", "total_error_replies",
		"role", "connected_slaves", "master_replid", "master_repl_offset", "used_cpu_sys", "used_cpu_user", "cluster_enabled"} {
		if _, ok := fields[f]; !ok {
			t.Errorf("INFO everything lacks %s", f)
		}
	}
	if fields["role"] != "master" || fields["tcp_port"] != strings.Split(srv.Addr, ":")[1] || len(fields["run_id"]) != 40 {
		t.Errorf("INFO: role %q, tcp_port %q, run_id %q", fields["role"], fields["tcp_port"], fields["run_id"])
	}
	for _, f := range []string{"used_cpu_sys", "used_cpu_user"} {
		if v, err := strconv.ParseFloat(fields[f], 64); err != nil || v < 0 {
			t.Errorf("INFO %s = %q", f, fields[f])
		}
	}
	for name, want := range map[string]map[string]string{
		"cmdstat_get":            {"calls": "3", "rejected_calls": "1", "failed_calls": "0"},
		"cmdstat_incr":           {"calls": "1", "rejected_calls": "0", "failed_calls": "1"},
		"cmdstat_client|setname": {"calls": "1", "failed_calls": "1"},
		"errorstat_ERR":          {"count": "3"},
		"db0":                    {"keys": "1", "expires": "0", "avg_ttl": "0"},
	} {
		for k, v := range want {
			if pairs[name][k] != v {
				t.Errorf("INFO %s = %v, want %s=%s", name, pairs[name], k, v)
			}
		}
	}
	if _, err := strconv.ParseFloat(pairs["cmdstat_get"]["usec_per_call"], 64); err != nil {
		t.Errorf("cmdstat_get = %v", pairs["cmdstat_get"])
	}
	if err := rdb.ConfigResetStat(c).Err(); err != nil {
		t.Fatal(err)
	}
	if _, fields, _ := parseInfo(t, info("all")); fields["cmdstat_get"] != "" || fields["errorstat_ERR"] != "" {
		t.Errorf("after CONFIG RESETSTAT: cmdstat_get %q, errorstat_ERR %q", fields["cmdstat_get"], fields["errorstat_ERR"])
	}
}

// clientListFields are the fields of a CLIENT LIST line: Redis 7.0's,
// and lib-name and lib-ver of Redis 7.2, in order.
var clientListFields = strings.Fields(`id addr laddr fd name age idle flags db sub psub ssub multi qbuf qbuf-free
	argv-mem multi-mem rbs rbp obl oll omem tot-mem events cmd user redir resp lib-name lib-ver`)

// TestClientList checks CLIENT LIST's fields and filters, and CLIENT
// KILL's forms.
func TestClientList(t *testing.T) {
	srv := start(t, server.Config{})
	rdb := newClient(t, srv.Addr, nil)
	c := ctx(t)
	me := rdb.Conn()
	defer me.Close()
	other := dialRaw(t, srv.Addr)
	other.do("CLIENT", "SETNAME", "victim")
	otherID := other.do("CLIENT", "ID").Int

	list, err := me.ClientList(c).Result()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(list, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("CLIENT LIST has %d lines, want 2:\n%s", len(lines), list)
	}
	for _, l := range lines {
		var names []string
		for _, f := range strings.Split(l, " ") {
			k, _, _ := strings.Cut(f, "=")
			names = append(names, k)
		}
		if !slices.Equal(names, clientListFields) {
			t.Fatalf("CLIENT LIST line has fields %v, want %v", names, clientListFields)
		}
	}
	if !strings.Contains(lines[1], " cmd=client|list ") && !strings.Contains(lines[0], " cmd=client|list ") {
		t.Errorf("no line shows cmd=client|list:\n%s", list)
	}
	byID, err := me.Do(c, "CLIENT", "LIST", "ID", strconv.FormatInt(otherID, 10)).Text()
	if err != nil || strings.Count(byID, "\n") != 1 || !strings.Contains(byID, " name=victim ") || !strings.Contains(byID, " cmd=client|id ") {
		t.Fatalf("CLIENT LIST ID %d = %q, %v", otherID, byID, err)
	}
	if normal, err := me.Do(c, "CLIENT", "LIST", "TYPE", "normal").Text(); err != nil || strings.Count(normal, "\n") != 2 {
		t.Fatalf("CLIENT LIST TYPE normal = %q, %v", normal, err)
	}
	// A subscriber is of type pubsub, and one in MULTI shows its queue.
	sub := dialRaw(t, srv.Addr)
	sub.do("SUBSCRIBE", "a", "b")
	sub.read() // b's confirmation
	sub.do("PSUBSCRIBE", "p*")
	tx := dialRaw(t, srv.Addr)
	tx.do("MULTI")
	tx.do("SET", "k", "v")
	if ps, err := me.Do(c, "CLIENT", "LIST", "TYPE", "pubsub").Text(); err != nil || strings.Count(ps, "\n") != 1 ||
		!strings.Contains(ps, " flags=P ") || !strings.Contains(ps, " sub=2 psub=1 ssub=0 multi=-1 ") {
		t.Fatalf("CLIENT LIST TYPE pubsub = %q, %v", ps, err)
	}
	if all, err := me.Do(c, "CLIENT", "LIST").Text(); err != nil || !strings.Contains(all, " flags=x db=0 sub=0 psub=0 ssub=0 multi=1 ") {
		t.Fatalf("CLIENT LIST shows no client in MULTI with one command queued:\n%s%v", all, err)
	}
	sub.Close()
	tx.Close()
	wantErr(t, me.Do(c, "CLIENT", "LIST", "TYPE", "bogus").Err(), "ERR Unknown client type 'bogus'")
	wantErr(t, me.Do(c, "CLIENT", "LIST", "ID", "x").Err(), "ERR Invalid client ID")
	wantErr(t, me.Do(c, "CLIENT", "LIST", "bogus").Err(), "ERR syntax error")

	wantErr(t, me.Do(c, "CLIENT", "KILL", "1.2.3.4:5").Err(), "ERR No such client")
	wantErr(t, me.Do(c, "CLIENT", "KILL", "ID", "0").Err(), "ERR client-id should be greater than 0")
	wantErr(t, me.Do(c, "CLIENT", "KILL", "USER", "nobody").Err(), "ERR No such user 'nobody'")
	wantErr(t, me.Do(c, "CLIENT", "KILL", "SKIPME", "maybe").Err(), "ERR syntax error")
	wantErr(t, me.Do(c, "CLIENT", "KILL", "ID", "1", "TYPE").Err(), "ERR syntax error")
	myID := me.ClientID(c).Val()
	if n, err := me.Do(c, "CLIENT", "KILL", "ID", strconv.FormatInt(myID, 10)).Int(); err != nil || n != 0 {
		t.Fatalf("CLIENT KILL ID <own id> = %d, %v; want 0 (SKIPME yes is the default)", n, err)
	}
	if n, err := me.Do(c, "CLIENT", "KILL", "ID", strconv.FormatInt(otherID, 10)).Int(); err != nil || n != 1 {
		t.Fatalf("CLIENT KILL ID %d = %d, %v", otherID, n, err)
	}
	other.expectClosed()

	// The old form, by address.
	third := dialRaw(t, srv.Addr)
	third.do("PING")
	if err := me.Do(c, "CLIENT", "KILL", third.LocalAddr().String()).Err(); err != nil {
		t.Fatal(err)
	}
	third.expectClosed()
	// A client that kills itself gets its reply, then is closed.
	self := dialRaw(t, srv.Addr)
	self.send(command("CLIENT", "KILL", "SKIPME", "no", "LADDR", srv.Addr))
	if got := self.read(); got.Int < 2 {
		t.Fatalf("CLIENT KILL SKIPME no LADDR %s = %s, want at least this connection and go-redis's", srv.Addr, got)
	}
	self.expectClosed()
}

// TestClientReply checks CLIENT REPLY OFF, ON and SKIP: the commands run,
// and only the replies they should get are sent.
func TestClientReply(t *testing.T) {
	srv := start(t, server.Config{})
	raw := dialRaw(t, srv.Addr)
	raw.send(command("CLIENT", "REPLY", "OFF") + command("SET", "a", "1") + command("GET", "a") + command("GET") +
		command("CLIENT", "REPLY", "ON") + command("GET", "a") +
		command("CLIENT", "REPLY", "SKIP") + command("INCR", "a") + command("GET", "a"))
	raw.expectBytes("+OK\r\n$1\r\n1\r\n$1\r\n2\r\n")
	raw.send(command("CLIENT", "REPLY", "MAYBE"))
	raw.expect(`(error) ERR syntax error`)
}

// TestClientPause checks that CLIENT PAUSE WRITE holds writes, not reads,
// until CLIENT UNPAUSE, and that PAUSE ALL holds every command until it
// times out.
func TestClientPause(t *testing.T) {
	srv := start(t, server.Config{})
	admin := dialRaw(t, srv.Addr)
	writer := dialRaw(t, srv.Addr)
	reader := dialRaw(t, srv.Addr)
	txWriter := dialRaw(t, srv.Addr)
	admin.do("CLIENT", "PAUSE", "100000", "WRITE")
	writer.send(command("SET", "paused", "1"))
	// A transaction is held at EXEC if it writes, as in Redis; one that
	// only reads is not.
	txWriter.do("MULTI")
	txWriter.do("SET", "paused-tx", "1")
	txWriter.send(command("EXEC"))
	reader.do("MULTI")
	reader.do("GET", "paused")
	if got := reader.do("EXEC"); got.String() != "[(nil)]" {
		t.Fatalf("a reading EXEC during the pause = %s", got)
	}
	if got := reader.do("GET", "paused"); got.String() != "(nil)" {
		t.Fatalf("GET during the pause = %s", got)
	}
	for _, k := range []string{"paused", "paused-tx"} {
		if _, ok := srv.Store.Get([]byte(k)); ok {
			t.Fatalf("a write of %s ran during CLIENT PAUSE WRITE", k)
		}
	}
	admin.do("CLIENT", "UNPAUSE")
	writer.expect(`"OK"`)
	txWriter.expect(`["OK"]`)

	admin.do("CLIENT", "PAUSE", "50", "ALL")
	reader.send(command("PING"))
	reader.expect(`"PONG"`) // once the pause ends by itself
	wantReplies := []string{`(error) ERR timeout is not an integer or out of range`, `(error) ERR CLIENT PAUSE mode must be WRITE or ALL`}
	for i, args := range [][]string{{"CLIENT", "PAUSE", "x"}, {"CLIENT", "PAUSE", "10", "SOME"}} {
		admin.send(command(args...))
		admin.expect(wantReplies[i])
	}
}

// TestConfigSet checks CONFIG SET's effects and errors.
func TestConfigSet(t *testing.T) {
	srv := start(t, server.Config{})
	rdb := newClient(t, srv.Addr, nil)
	c := ctx(t)
	for _, tc := range []struct {
		args []any
		err  string
	}{
		{[]any{"nosuch", "1"}, "ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'"},
		{[]any{"proto-max-bulk-len", "1"}, "ERR CONFIG SET failed (possibly related to argument 'proto-max-bulk-len') - can't set immutable config"},
		{[]any{"maxclients", "abc"}, "ERR CONFIG SET failed (possibly related to argument 'maxclients') - argument couldn't be parsed into an integer"},
		{[]any{"maxclients", "0"}, "ERR CONFIG SET failed (possibly related to argument 'maxclients') - argument must be between 1 and 4294967295 inclusive"},
		{[]any{"timeout", "5", "appendonly"}, "ERR syntax error"},
		{[]any{"timeout", "5", "appendonly", "no"}, "ERR CONFIG SET failed (possibly related to argument 'appendonly') - can't set immutable config"},
	} {
		wantErr(t, rdb.Do(c, append([]any{"CONFIG", "SET"}, tc.args...)...).Err(), tc.err)
	}
	if got := rdb.ConfigGet(c, "timeout").Val(); got["timeout"] != "0" {
		t.Fatalf("a CONFIG SET that failed changed timeout: %v", got)
	}

	// maxclients: with as many clients as allowed, the next is refused.
	rdb.Ping(c)
	if err := rdb.ConfigSet(c, "maxclients", "1").Err(); err != nil {
		t.Fatal(err)
	}
	refused := dialRaw(t, srv.Addr)
	refused.expect(`(error) ERR max number of clients reached`)
	rdb.ConfigSet(c, "maxclients", "100")

	// requirepass: new connections must authenticate; this one stays in.
	if err := rdb.ConfigSet(c, "requirepass", "s3cret").Err(); err != nil {
		t.Fatal(err)
	}
	if got := rdb.ConfigGet(c, "requirepass").Val(); got["requirepass"] != "s3cret" {
		t.Fatalf("CONFIG GET requirepass = %v", got)
	}
	locked := dialRaw(t, srv.Addr)
	locked.send(command("GET", "k"))
	locked.expect(`(error) NOAUTH Authentication required.`)
	locked.send(command("AUTH", "s3cret"))
	locked.expect(`"OK"`)
	rdb.ConfigSet(c, "requirepass", "")

	// The slow log, with every command logged, and its length bounded.
	if err := rdb.Do(c, "CONFIG", "SET", "slowlog-log-slower-than", "0", "slowlog-max-len", "3").Err(); err != nil {
		t.Fatal(err)
	}
	rdb.SlowLogReset(c)
	long := strings.Repeat("v", 200)
	rdb.Echo(c, long)
	rdb.Echo(c, "x")
	rdb.Ping(c)
	logged, err := rdb.SlowLogGet(c, -1).Result()
	if err != nil || len(logged) != 3 {
		t.Fatalf("SLOWLOG GET -1 = %v, %v; want 3 entries", logged, err)
	}
	if got := logged[2].Args; len(got) != 2 || got[0] != "echo" || got[1] != long[:128]+"... (72 more bytes)" {
		t.Fatalf("SLOWLOG's oldest entry has args %q, want ECHO's, the second cut", got)
	}
	if logged[0].ID <= logged[1].ID || logged[0].ClientAddr == "" {
		t.Fatalf("SLOWLOG entries %+v", logged)
	}
	if n := rdb.Do(c, "SLOWLOG", "LEN").Val(); n != int64(3) {
		t.Fatalf("SLOWLOG LEN = %v, want 3 (slowlog-max-len)", n)
	}
	rdb.ConfigSet(c, "slowlog-log-slower-than", "-1")
	rdb.SlowLogReset(c)
	rdb.Ping(c)
	if n := rdb.Do(c, "SLOWLOG", "LEN").Val(); n != int64(0) {
		t.Fatalf("SLOWLOG LEN with the log off = %v", n)
	}
	wantErr(t, rdb.Do(c, "SLOWLOG", "GET", "-2").Err(), "ERR count should be greater than or equal to -1")
}

// TestCommandTable checks COMMAND's subcommands, and that every command
// and subcommand has docs: one added without them fails here.
func TestCommandTable(t *testing.T) {
	srv := start(t, server.Config{})
	rdb := newClient(t, srv.Addr, nil)
	c := ctx(t)
	names, err := rdb.CommandList(c, nil).Result()
	if err != nil || !slices.Contains(names, "client|list") || !slices.Contains(names, "get") {
		t.Fatalf("COMMAND LIST = %v, %v", names, err)
	}
	count := rdb.Do(c, "COMMAND", "COUNT").Val().(int64)
	if top := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return strings.Contains(n, "|") }); int64(len(top)) != count {
		t.Fatalf("COMMAND COUNT %d, but COMMAND LIST has %d commands", count, len(top))
	}
	reply, err := rdb.Do(c, append([]any{"COMMAND", "DOCS"}, anys(names)...)...).Result()
	if err != nil {
		t.Fatal(err)
	}
	docs := reply.(map[any]any)
	for _, n := range names {
		top, _, isSub := strings.Cut(n, "|")
		d, _ := docs[n].(map[any]any)
		if isSub {
			subs, _ := docs[top].(map[any]any)["subcommands"].(map[any]any)
			d, _ = subs[n].(map[any]any)
		}
		for _, f := range []string{"summary", "since", "group", "complexity"} {
			if s, _ := d[f].(string); s == "" {
				t.Errorf("COMMAND DOCS %s = %v, want a %s", n, d, f)
			}
		}
	}
	// Each container's HELP lists every subcommand the table has.
	for _, n := range names {
		top, sub, isSub := strings.Cut(n, "|")
		if !isSub || top == "cluster" {
			continue
		}
		help, err := rdb.Do(c, top, "HELP").StringSlice()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(help, func(l string) bool { return strings.HasPrefix(l, strings.ToUpper(sub)) }) {
			t.Errorf("%s HELP does not list %s:\n%s", strings.ToUpper(top), strings.ToUpper(sub), strings.Join(help, "\n"))
		}
	}
	if str, err := rdb.CommandList(c, &redis.FilterBy{ACLCat: "string"}).Result(); err != nil || !slices.Contains(str, "incr") || slices.Contains(str, "ping") {
		t.Fatalf("COMMAND LIST FILTERBY ACLCAT string = %v, %v", str, err)
	}
	if cl, err := rdb.CommandList(c, &redis.FilterBy{Pattern: "client|*"}).Result(); err != nil || !slices.Contains(cl, "client|kill") || slices.Contains(cl, "get") {
		t.Fatalf("COMMAND LIST FILTERBY PATTERN client|* = %v, %v", cl, err)
	}
	if keys, err := rdb.CommandGetKeys(c, "MSET", "a", "1", "b", "2").Result(); err != nil || !slices.Equal(keys, []string{"a", "b"}) {
		t.Fatalf("COMMAND GETKEYS MSET = %v, %v", keys, err)
	}
	if kf, err := rdb.CommandGetKeysAndFlags(c, "del", "x").Result(); err != nil || len(kf) != 1 || kf[0].Key != "x" || !slices.Equal(kf[0].Flags, []string{"RM", "delete"}) {
		t.Fatalf("COMMAND GETKEYSANDFLAGS DEL x = %+v, %v", kf, err)
	}
	wantErr(t, rdb.Do(c, "COMMAND", "GETKEYS", "nosuch", "a").Err(), "ERR Invalid command specified")
	wantErr(t, rdb.Do(c, "COMMAND", "GETKEYS", "ping", "x").Err(), "ERR The command has no key arguments")
	wantErr(t, rdb.Do(c, "COMMAND", "GETKEYS", "get", "a", "b").Err(), "ERR Invalid number of arguments specified for command")
	wantErr(t, rdb.Do(c, "COMMAND", "LIST", "FILTERBY", "bogus", "x").Err(), "ERR syntax error")
	wantErr(t, rdb.Do(c, "COMMAND", "COUNT", "x").Err(), "ERR wrong number of arguments for 'command|count' command")

	// go-redis reads COMMAND's reply whole (it routes ClusterClient's
	// commands by it): the flags, ACL categories, tips and key specs.
	info, err := rdb.Command(c).Result()
	if err != nil {
		t.Fatal(err)
	}
	if mset := info["mset"]; mset == nil || !slices.Equal(mset.ACLFlags, []string{"@write", "@string", "@slow"}) {
		t.Fatalf("COMMAND mset = %+v", mset)
	}
	if kill := info["client"]; kill == nil || kill.Arity != -2 {
		t.Fatalf("COMMAND client = %+v", kill)
	}
	usage, err := rdb.Do(c, "MEMORY", "USAGE", "nosuch").Result()
	if err != redis.Nil {
		t.Fatalf("MEMORY USAGE nosuch = %v, %v", usage, err)
	}
	rdb.Set(c, "m", strings.Repeat("x", 1000), 0)
	if n, err := rdb.MemoryUsage(c, "m").Result(); err != nil || n < 1001 {
		t.Fatalf("MEMORY USAGE m = %d, %v", n, err)
	}
	if ls, err := rdb.LastSave(c).Result(); err != nil || ls <= 0 {
		t.Fatalf("LASTSAVE = %d, %v", ls, err)
	}
	if n, err := rdb.Wait(c, 1, 0).Result(); err != nil || n != 0 {
		t.Fatalf("WAIT 1 0 on a single node = %d, %v", n, err)
	}
}

func anys(s []string) []any {
	a := make([]any, len(s))
	for i, v := range s {
		a[i] = v
	}
	return a
}

// waitMember is the leader, member 1, of a group of three, whose
// members' match indexes the test sets: WAIT counts those that cover the
// client's last write.
type waitMember struct {
	server.Local
	mu      sync.Mutex
	match   [4]uint64
	applied uint64
}

func (w *waitMember) Apply(ctx context.Context, batch []byte, done func(int, store.Result)) error {
	return w.Local.Apply(ctx, batch, func(i int, res store.Result) {
		w.mu.Lock()
		w.applied++
		w.mu.Unlock()
		done(i, res)
	})
}

func (w *waitMember) Applied() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.applied
}

func (w *waitMember) setMatch(id int, m uint64) {
	w.mu.Lock()
	w.match[id] = m
	w.mu.Unlock()
}

func (w *waitMember) Redirect() (string, bool) { return "", false }

func (w *waitMember) ClusterView() server.ClusterView {
	w.mu.Lock()
	defer w.mu.Unlock()
	v := server.ClusterView{Self: 1, Leader: 1, Applied: w.applied, Commit: w.applied}
	for id := uint64(1); id <= 3; id++ {
		v.Members = append(v.Members, server.ClusterMember{ID: id, Addr: fmt.Sprintf("127.0.0.1:700%d", id), Voter: true, Match: w.match[id]})
	}
	return v
}

// TestWait checks that WAIT counts the members whose logs have the
// client's writes, and waits for as many as asked.
func TestWait(t *testing.T) {
	w := &waitMember{Local: server.Local{S: store.New(store.Options{})}}
	srv := servertest.StartBackend(t, server.Config{}, w)
	rdb := newClient(t, srv.Addr, nil)
	c := ctx(t)
	conn := rdb.Conn()
	defer conn.Close()
	if err := conn.Set(c, "a", "1", 0).Err(); err != nil { // index 1
		t.Fatal(err)
	}
	w.setMatch(2, 1)
	if n, err := conn.Wait(c, 1, 0).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 0 with member 2 caught up = %d, %v", n, err)
	}
	if n, err := conn.Wait(c, 2, 20*time.Millisecond).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 2 20 with member 3 behind = %d, %v", n, err)
	}
	done := make(chan int64, 1)
	go func() { done <- conn.Wait(c, 2, 0).Val() }()
	w.setMatch(3, 1)
	if n := <-done; n != 2 {
		t.Fatalf("WAIT 2 0 once member 3 caught up = %d", n)
	}
	if err := conn.Set(c, "a", "2", 0).Err(); err != nil { // index 2: no member has it
		t.Fatal(err)
	}
	if n, err := conn.Wait(c, 1, 10*time.Millisecond).Result(); err != nil || n != 0 {
		t.Fatalf("WAIT 1 10 after a write no member has = %d, %v", n, err)
	}
	info := rdb.Info(c, "replication").Val()
	if !strings.Contains(info, "role:master\r\nconnected_slaves:2\r\n") || !strings.Contains(info, "master_repl_offset:2\r\n") {
		t.Fatalf("INFO replication = %q", info)
	}
}
