package server_test

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flintkv/flint/internal/server"
)

// expiryScript is a session of expiry commands and Redis 7's replies to
// them, byte for byte in RESP2 (RESP3 replaces the null bulk string with
// "_"). Times are far in the future (4102444800 is 2100-01-01), or relative
// and read back within the same second. Setting FLINT_EXPIRY_REDIS to a
// redis-server's address runs it against that server too: the replies
// here are what Redis 7.0 gives.
var expiryScript = []struct {
	cmd   []string
	reply string
}{
	{[]string{"SET", "k", "v"}, "+OK\r\n"},
	{[]string{"TTL", "k"}, ":-1\r\n"},
	{[]string{"PTTL", "k"}, ":-1\r\n"},
	{[]string{"EXPIRETIME", "k"}, ":-1\r\n"},
	{[]string{"PEXPIRETIME", "k"}, ":-1\r\n"},
	{[]string{"TTL", "nokey"}, ":-2\r\n"},
	{[]string{"PTTL", "nokey"}, ":-2\r\n"},
	{[]string{"EXPIRETIME", "nokey"}, ":-2\r\n"},
	{[]string{"PEXPIRETIME", "nokey"}, ":-2\r\n"},
	{[]string{"EXPIRE", "k", "100"}, ":1\r\n"},
	{[]string{"TTL", "k"}, ":100\r\n"},
	{[]string{"EXPIRE", "k", "100", "NX"}, ":0\r\n"},
	{[]string{"EXPIRE", "k", "200", "XX"}, ":1\r\n"},
	{[]string{"EXPIRE", "k", "100", "GT"}, ":0\r\n"},
	{[]string{"EXPIRE", "k", "300", "gt"}, ":1\r\n"},
	{[]string{"EXPIRE", "k", "400", "LT"}, ":0\r\n"},
	{[]string{"EXPIRE", "k", "50", "LT", "XX"}, ":1\r\n"},
	{[]string{"TTL", "k"}, ":50\r\n"},
	{[]string{"EXPIRE", "k", "100", "NX", "XX"}, "-ERR NX and XX, GT or LT options at the same time are not compatible\r\n"},
	{[]string{"EXPIRE", "k", "100", "nx", "gt"}, "-ERR NX and XX, GT or LT options at the same time are not compatible\r\n"},
	{[]string{"EXPIRE", "k", "100", "GT", "LT"}, "-ERR GT and LT options at the same time are not compatible\r\n"},
	{[]string{"EXPIRE", "k", "100", "foo"}, "-ERR Unsupported option foo\r\n"},
	{[]string{"EXPIRE", "k", "abc", "foo"}, "-ERR Unsupported option foo\r\n"},
	{[]string{"EXPIRE", "k", "abc"}, "-ERR value is not an integer or out of range\r\n"},
	{[]string{"EXPIRE", "k", "9223372036854775807"}, "-ERR invalid expire time in 'expire' command\r\n"},
	{[]string{"EXPIRE", "k", "-9223372036854775808"}, "-ERR invalid expire time in 'expire' command\r\n"},
	{[]string{"PEXPIRE", "k", "9223372036854775807"}, "-ERR invalid expire time in 'pexpire' command\r\n"},
	{[]string{"EXPIREAT", "k", "9223372036854775807"}, "-ERR invalid expire time in 'expireat' command\r\n"},
	{[]string{"EXPIRE", "k"}, "-ERR wrong number of arguments for 'expire' command\r\n"},
	{[]string{"TTL", "k", "x"}, "-ERR wrong number of arguments for 'ttl' command\r\n"},
	{[]string{"EXPIREAT", "k", "4102444800"}, ":1\r\n"},
	{[]string{"EXPIRETIME", "k"}, ":4102444800\r\n"},
	{[]string{"PEXPIRETIME", "k"}, ":4102444800000\r\n"},
	{[]string{"PEXPIREAT", "k", "4102444800499"}, ":1\r\n"},
	{[]string{"EXPIRETIME", "k"}, ":4102444800\r\n"},
	{[]string{"PEXPIREAT", "k", "4102444800500"}, ":1\r\n"},
	{[]string{"EXPIRETIME", "k"}, ":4102444801\r\n"},
	{[]string{"PEXPIRETIME", "k"}, ":4102444800500\r\n"},
	{[]string{"PERSIST", "k"}, ":1\r\n"},
	{[]string{"PERSIST", "k"}, ":0\r\n"},
	{[]string{"TTL", "k"}, ":-1\r\n"},
	{[]string{"PERSIST", "nokey"}, ":0\r\n"},
	{[]string{"EXPIRE", "nokey", "10"}, ":0\r\n"},
	// SET's options; a plain SET clears the deadline, KEEPTTL keeps it.
	{[]string{"SET", "k", "v", "EX", "100"}, "+OK\r\n"},
	{[]string{"TTL", "k"}, ":100\r\n"},
	{[]string{"SET", "k", "w", "KEEPTTL"}, "+OK\r\n"},
	{[]string{"TTL", "k"}, ":100\r\n"},
	{[]string{"SET", "k", "x"}, "+OK\r\n"},
	{[]string{"TTL", "k"}, ":-1\r\n"},
	{[]string{"SET", "k", "v", "px", "100000"}, "+OK\r\n"},
	{[]string{"TTL", "k"}, ":100\r\n"},
	{[]string{"SET", "k", "v", "EXAT", "4102444800"}, "+OK\r\n"},
	{[]string{"EXPIRETIME", "k"}, ":4102444800\r\n"},
	{[]string{"SET", "k", "v", "PXAT", "4102444800123"}, "+OK\r\n"},
	{[]string{"PEXPIRETIME", "k"}, ":4102444800123\r\n"},
	{[]string{"SET", "k", "v", "EX", "0"}, "-ERR invalid expire time in 'set' command\r\n"},
	{[]string{"SET", "k", "v", "EX", "-1"}, "-ERR invalid expire time in 'set' command\r\n"},
	{[]string{"SET", "k", "v", "PXAT", "0"}, "-ERR invalid expire time in 'set' command\r\n"},
	{[]string{"SET", "k", "v", "EX", "abc"}, "-ERR value is not an integer or out of range\r\n"},
	{[]string{"SET", "k", "v", "EX", "9223372036854775807"}, "-ERR invalid expire time in 'set' command\r\n"},
	{[]string{"SET", "k", "v", "EX", "9223372036854775"}, "-ERR invalid expire time in 'set' command\r\n"},
	{[]string{"SET", "k", "v", "PX", "9223372036854775807"}, "-ERR invalid expire time in 'set' command\r\n"},
	{[]string{"SET", "k", "v", "PX", "10", "KEEPTTL"}, "-ERR syntax error\r\n"},
	{[]string{"SET", "k", "v", "KEEPTTL", "EX", "10"}, "-ERR syntax error\r\n"},
	{[]string{"SET", "k", "v", "EX", "10", "PX", "10"}, "-ERR syntax error\r\n"},
	{[]string{"SET", "k", "v", "EXAT", "10", "PXAT", "20"}, "-ERR syntax error\r\n"},
	{[]string{"SET", "k", "v", "EX"}, "-ERR syntax error\r\n"},
	{[]string{"PEXPIRETIME", "k"}, ":4102444800123\r\n"}, // nothing refused was written
	{[]string{"SET", "k", "v", "EX", "10", "EX", "20"}, "+OK\r\n"},
	{[]string{"TTL", "k"}, ":20\r\n"},
	{[]string{"SET", "k", "w", "XX", "GET", "EX", "30"}, "$1\r\nv\r\n"},
	{[]string{"TTL", "k"}, ":30\r\n"},
	{[]string{"SET", "k", "x", "NX", "GET", "EX", "40"}, "$1\r\nw\r\n"},
	{[]string{"TTL", "k"}, ":30\r\n"},
	// APPEND and INCR keep the deadline; GETSET and MSET clear it.
	{[]string{"APPEND", "k", "x"}, ":2\r\n"},
	{[]string{"TTL", "k"}, ":30\r\n"},
	{[]string{"SET", "n", "1", "EX", "100"}, "+OK\r\n"},
	{[]string{"INCR", "n"}, ":2\r\n"},
	{[]string{"TTL", "n"}, ":100\r\n"},
	{[]string{"GETSET", "n", "5"}, "$1\r\n2\r\n"},
	{[]string{"TTL", "n"}, ":-1\r\n"},
	{[]string{"MSET", "k", "v"}, "+OK\r\n"},
	{[]string{"TTL", "k"}, ":-1\r\n"},
	// A deadline that has passed removes the key at once.
	{[]string{"SET", "k", "v", "EXAT", "1"}, "+OK\r\n"},
	{[]string{"GET", "k"}, "$-1\r\n"},
	{[]string{"EXISTS", "k"}, ":0\r\n"},
	{[]string{"SET", "k", "v"}, "+OK\r\n"},
	{[]string{"EXPIRE", "k", "0"}, ":1\r\n"},
	{[]string{"EXISTS", "k"}, ":0\r\n"},
	{[]string{"SET", "k", "v"}, "+OK\r\n"},
	{[]string{"EXPIREAT", "k", "1"}, ":1\r\n"},
	{[]string{"TTL", "k"}, ":-2\r\n"},
	{[]string{"SET", "k", "v"}, "+OK\r\n"},
	{[]string{"PEXPIRE", "k", "-1"}, ":1\r\n"},
	{[]string{"GET", "k"}, "$-1\r\n"},
	{[]string{"SET", "k", "v", "PX", "100000"}, "+OK\r\n"},
	{[]string{"EXPIRE", "k", "0", "GT"}, ":0\r\n"},
	{[]string{"EXISTS", "k"}, ":1\r\n"},
	// SETEX, PSETEX.
	{[]string{"SETEX", "k", "100", "v"}, "+OK\r\n"},
	{[]string{"TTL", "k"}, ":100\r\n"},
	{[]string{"SETEX", "k", "0", "v"}, "-ERR invalid expire time in 'setex' command\r\n"},
	{[]string{"SETEX", "k", "abc", "v"}, "-ERR value is not an integer or out of range\r\n"},
	{[]string{"SETEX", "k", "9223372036854775", "v"}, "-ERR invalid expire time in 'setex' command\r\n"},
	{[]string{"PSETEX", "k", "100000", "v"}, "+OK\r\n"},
	{[]string{"TTL", "k"}, ":100\r\n"},
	{[]string{"PSETEX", "k", "0", "v"}, "-ERR invalid expire time in 'psetex' command\r\n"},
	{[]string{"SETEX", "k", "10"}, "-ERR wrong number of arguments for 'setex' command\r\n"},
	// GETEX.
	{[]string{"GETEX", "k"}, "$1\r\nv\r\n"},
	{[]string{"GETEX", "k", "PERSIST"}, "$1\r\nv\r\n"},
	{[]string{"TTL", "k"}, ":-1\r\n"},
	{[]string{"GETEX", "k", "EX", "100"}, "$1\r\nv\r\n"},
	{[]string{"TTL", "k"}, ":100\r\n"},
	{[]string{"GETEX", "k", "PXAT", "4102444800123"}, "$1\r\nv\r\n"},
	{[]string{"PEXPIRETIME", "k"}, ":4102444800123\r\n"},
	{[]string{"GETEX", "k", "EX", "10", "PX", "10"}, "-ERR syntax error\r\n"},
	{[]string{"GETEX", "k", "PERSIST", "EX", "10"}, "-ERR syntax error\r\n"},
	{[]string{"GETEX", "k", "EX", "10", "PERSIST"}, "-ERR syntax error\r\n"},
	{[]string{"GETEX", "k", "KEEPTTL"}, "-ERR syntax error\r\n"},
	{[]string{"GETEX", "k", "EX"}, "-ERR syntax error\r\n"},
	{[]string{"GETEX", "nokey", "foo"}, "-ERR syntax error\r\n"},
	{[]string{"GETEX", "k", "EX", "0"}, "-ERR invalid expire time in 'getex' command\r\n"},
	{[]string{"GETEX", "k", "EX", "abc"}, "-ERR value is not an integer or out of range\r\n"},
	{[]string{"GETEX", "nokey", "EX", "0"}, "$-1\r\n"},
	{[]string{"GETEX", "nokey", "EX", "abc"}, "$-1\r\n"},
	{[]string{"GETEX", "nokey", "EX", "10"}, "$-1\r\n"},
	{[]string{"GETEX", "k", "EXAT", "1"}, "$1\r\nv\r\n"},
	{[]string{"EXISTS", "k"}, ":0\r\n"},
	{[]string{"GETEX"}, "-ERR wrong number of arguments for 'getex' command\r\n"},
	{[]string{"DEL", "n"}, ":1\r\n"},
}

// TestExpiryReplies runs expiryScript in RESP2 and in RESP3, and checks
// every reply byte for byte.
func TestExpiryReplies(t *testing.T) {
	addrs := []string{start(t, server.Config{}).Addr}
	if a := os.Getenv("FLINT_EXPIRY_REDIS"); a != "" {
		addrs = append(addrs, a)
	}
	for _, addr := range addrs {
		for _, resp3 := range []bool{false, true} {
			raw := dialRaw(t, addr)
			if resp3 {
				raw.send(command("HELLO", "3"))
				raw.read()
			}
			for _, step := range expiryScript {
				want := step.reply
				if resp3 && want == "$-1\r\n" {
					want = "_\r\n"
				}
				raw.send(command(step.cmd...))
				raw.SetReadDeadline(time.Now().Add(liveness))
				got := make([]byte, len(want))
				if _, err := io.ReadFull(raw.br, got); err != nil || string(got) != want {
					t.Fatalf("%s (RESP3 %v): %s: got %q (%v), want %q", addr, resp3, strings.Join(step.cmd, " "), got, err, want)
				}
			}
		}
	}
}

// TestExpiryGoRedis uses expiring keys as applications do through go-redis:
// SET with a TTL, EXPIRE, TTL, PERSIST, SETEX, GETEX, and a lock taken
// with SET NX PX that frees itself once its TTL has passed. Nothing else
// is written meanwhile: the expirer alone removes the expired keys.
func TestExpiryGoRedis(t *testing.T) {
	srv := start(t, server.Config{ExpireDelay: 20 * time.Millisecond})
	rdb := newClient(t, srv.Addr, nil)
	c := ctx(t)
	within := func(what string, got, lo, hi time.Duration) {
		t.Helper()
		if got < lo || got > hi {
			t.Fatalf("%s: TTL %v, want %v to %v", what, got, lo, hi)
		}
	}
	if err := rdb.Set(c, "session", "data", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	within("SET EX", rdb.TTL(c, "session").Val(), 59*time.Minute, time.Hour)
	if ok, err := rdb.Expire(c, "session", 2*time.Hour).Result(); err != nil || !ok {
		t.Fatalf("EXPIRE = %v, %v", ok, err)
	}
	within("EXPIRE", rdb.PTTL(c, "session").Val(), 119*time.Minute, 2*time.Hour)
	if ok, err := rdb.ExpireGT(c, "session", time.Hour).Result(); err != nil || ok {
		t.Fatalf("EXPIRE GT earlier = %v, %v", ok, err)
	}
	if ok, err := rdb.Persist(c, "session").Result(); err != nil || !ok {
		t.Fatalf("PERSIST = %v, %v", ok, err)
	}
	if d := rdb.TTL(c, "session").Val(); d != -1 {
		t.Fatalf("TTL after PERSIST = %v, want -1", d)
	}
	if d := rdb.TTL(c, "nokey").Val(); d != -2 {
		t.Fatalf("TTL of a missing key = %v, want -2", d)
	}
	if err := rdb.Do(c, "SETEX", "cache", "60", "x").Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := rdb.GetEx(c, "cache", 10*time.Minute).Result(); err != nil || v != "x" {
		t.Fatalf("GETEX = %q, %v", v, err)
	}
	within("GETEX", rdb.TTL(c, "cache").Val(), 9*time.Minute, 10*time.Minute)

	// A lock: taken, refused while held, free again once its TTL passes.
	if ok, err := rdb.SetNX(c, "lock", "a", 100*time.Millisecond).Result(); err != nil || !ok {
		t.Fatalf("SET NX PX = %v, %v", ok, err)
	}
	if ok := rdb.SetNX(c, "lock", "b", time.Second).Val(); ok {
		t.Fatal("a held lock was taken again")
	}
	if err := rdb.Set(c, "short", "v", time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	// The expirer removes both without any other write: the store holds
	// only session and cache.
	eventually(t, "the expirer to remove the expired keys", func() bool { return srv.Store.Len() == 2 })
	if n := rdb.Exists(c, "lock", "short").Val(); n != 0 {
		t.Fatalf("EXISTS of expired keys = %d", n)
	}
	if ok, err := rdb.SetNX(c, "lock", "b", time.Second).Result(); err != nil || !ok {
		t.Fatalf("SET NX PX after the lock expired = %v, %v", ok, err)
	}
	info := rdb.Info(c, "keyspace").Val()
	if !strings.Contains(info, "db0:keys=3,expires=2,") {
		t.Fatalf("INFO keyspace = %q, want 3 keys, 2 with a deadline", info)
	}
	// avg_ttl averages cache's (at most 10 minutes) and lock's (at most 1 s).
	_, avg, _ := strings.Cut(strings.TrimSpace(info), "avg_ttl=")
	if ms, err := strconv.ParseInt(avg, 10, 64); err != nil || ms <= 0 || ms > 300_500 {
		t.Fatalf("INFO keyspace avg_ttl = %q, want the average of two TTLs, in ms", avg)
	}
}

// TestExpirerMassExpiry gives 20,000 keys deadlines that pass together:
// the expirer removes them all, in batches of at most 1,024 keys, while
// nothing else is written, and a key written meanwhile without a deadline
// stays.
func TestExpirerMassExpiry(t *testing.T) {
	srv := start(t, server.Config{ExpireDelay: 10 * time.Millisecond})
	rdb := newClient(t, srv.Addr, nil)
	c := ctx(t)
	const n = 20_000
	pipe := rdb.Pipeline()
	for i := range n {
		pipe.Set(c, fmt.Sprint("mass", i), "v", 200*time.Millisecond)
	}
	pipe.Set(c, "stays", "v", 0)
	if _, err := pipe.Exec(c); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the expirer to remove 20,000 keys", func() bool { return srv.Store.Len() == 1 })
	if v := rdb.Get(c, "stays").Val(); v != "v" {
		t.Fatalf("stays = %q", v)
	}
}

// TestExpiryInMulti queues the expiry commands in a transaction: each is
// applied in the transaction's entry, and TTL and GETEX read the key as
// the commands before them in it left it, as in Redis (redis-server 7
// gives these bytes).
func TestExpiryInMulti(t *testing.T) {
	srv := start(t, server.Config{})
	raw := dialRaw(t, srv.Addr)
	runSteps(t, raw, []txStep{
		{"MULTI", "+OK\r\n"},
		{"SET k v EX 100", "+QUEUED\r\n"},
		{"TTL k", "+QUEUED\r\n"},
		{"EXPIREAT k 4102444800", "+QUEUED\r\n"},
		{"EXPIRETIME k", "+QUEUED\r\n"},
		{"PERSIST k", "+QUEUED\r\n"},
		{"PTTL k", "+QUEUED\r\n"},
		{"GETEX k EX 50", "+QUEUED\r\n"},
		{"TTL k", "+QUEUED\r\n"},
		{"SETEX k2 0 v", "+QUEUED\r\n"},
		{"GETEX k EX 0", "+QUEUED\r\n"},
		{"GETEX nosuch EX 0", "+QUEUED\r\n"},
		{"GETEX k", "+QUEUED\r\n"},
		{"EXEC", "*12\r\n+OK\r\n:100\r\n:1\r\n:4102444800\r\n:1\r\n:-1\r\n$1\r\nv\r\n:50\r\n" +
			"-ERR invalid expire time in 'setex' command\r\n-ERR invalid expire time in 'getex' command\r\n$-1\r\n$1\r\nv\r\n"},
		{"TTL k", ":50\r\n"},
	})
}

// TestExpiryAbortsWatch: a watched key that expires, and that the expirer
// removes, before EXEC aborts the transaction.
func TestExpiryAbortsWatch(t *testing.T) {
	srv := start(t, server.Config{ExpireDelay: 10 * time.Millisecond})
	raw := dialRaw(t, srv.Addr)
	runSteps(t, raw, []txStep{{"SET w v PX 20", "+OK\r\n"}, {"WATCH w", "+OK\r\n"}})
	eventually(t, "the expirer to remove w", func() bool { return srv.Store.Len() == 0 })
	runSteps(t, raw, []txStep{{"MULTI", "+OK\r\n"}, {"SET x 1", "+QUEUED\r\n"}, {"EXEC", "*-1\r\n"}})
}
