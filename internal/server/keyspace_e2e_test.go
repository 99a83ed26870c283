package server_test

import (
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flintkv/flint/internal/server"
	"github.com/flintkv/flint/internal/server/servertest"
	"github.com/flintkv/flint/internal/store"
)

// TestKeyspaceStringReplies runs a script of the keyspace and string
// commands, and their errors, in RESP2 and then RESP3 on a fresh store,
// and checks each reply byte for byte. The expected replies are
// redis-server 7.0.15's, captured from the same script, but for the
// deliberate difference of COPY ... DB 1: Flint has database 0 only.
func TestKeyspaceStringReplies(t *testing.T) {
	srv := start(t, server.Config{})
	script := []struct {
		args         []string
		resp2, resp3 string // resp3 "" is resp2
	}{
		{[]string{"SET", "f", "10.5"}, "+OK\r\n", ""},
		{[]string{"INCRBYFLOAT", "f", "0.1"}, "$4\r\n10.6\r\n", ""},
		{[]string{"INCRBYFLOAT", "f", "x"}, "-ERR value is not a valid float\r\n", ""},
		{[]string{"INCRBYFLOAT", "f", "inf"}, "-ERR increment would produce NaN or Infinity\r\n", ""},
		{[]string{"GETDEL", "f"}, "$4\r\n10.6\r\n", ""},
		{[]string{"GETDEL", "f"}, "$-1\r\n", "_\r\n"},
		{[]string{"SETRANGE", "r", "2", "ab"}, ":4\r\n", ""},
		{[]string{"SETRANGE", "r", "-1", "ab"}, "-ERR offset is out of range\r\n", ""},
		{[]string{"SETRANGE", "r", "536870911", "ab"}, "-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n", ""},
		{[]string{"GETRANGE", "r", "0", "-1"}, "$4\r\n\x00\x00ab\r\n", ""},
		{[]string{"GETRANGE", "r", "-1", "-2"}, "$0\r\n\r\n", ""},
		{[]string{"GETRANGE", "nokey", "0", "-1"}, "$0\r\n\r\n", ""},
		{[]string{"SUBSTR", "r", "2", "3"}, "$2\r\nab\r\n", ""},
		{[]string{"SETBIT", "b", "9", "1"}, ":0\r\n", ""},
		{[]string{"SETBIT", "b", "9", "2"}, "-ERR bit is not an integer or out of range\r\n", ""},
		{[]string{"SETBIT", "b", "-1", "1"}, "-ERR bit offset is not an integer or out of range\r\n", ""},
		{[]string{"GETBIT", "b", "9"}, ":1\r\n", ""},
		{[]string{"BITCOUNT", "b"}, ":1\r\n", ""},
		{[]string{"BITCOUNT", "b", "1", "1", "BIT"}, ":0\r\n", ""},
		{[]string{"BITCOUNT", "b", "0", "0", "WORD"}, "-ERR syntax error\r\n", ""},
		{[]string{"BITPOS", "b", "1"}, ":9\r\n", ""},
		{[]string{"BITPOS", "b", "0", "1", "-1"}, ":8\r\n", ""},
		{[]string{"BITPOS", "b", "3"}, "-ERR The bit argument must be 1 or 0.\r\n", ""},
		{[]string{"SET", "k1", "foobar"}, "+OK\r\n", ""},
		{[]string{"SET", "k2", "abcdef"}, "+OK\r\n", ""},
		{[]string{"BITOP", "AND", "dest", "k1", "k2"}, ":6\r\n", ""},
		{[]string{"BITOP", "NOT", "dest", "k1", "k2"}, "-ERR BITOP NOT must be called with a single source key.\r\n", ""},
		{[]string{"BITOP", "NAND", "dest", "k1"}, "-ERR syntax error\r\n", ""},
		{[]string{"GET", "dest"}, "$6\r\n`bc`ab\r\n", ""},
		{[]string{"BITFIELD", "bf", "SET", "u8", "0", "255", "OVERFLOW", "FAIL", "INCRBY", "u8", "0", "1", "GET", "i4", "#1"}, "*3\r\n:0\r\n$-1\r\n:-1\r\n", "*3\r\n:0\r\n_\r\n:-1\r\n"},
		{[]string{"BITFIELD", "bf", "GET", "u64", "0"}, "-ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.\r\n", ""},
		{[]string{"BITFIELD", "bf", "OVERFLOW", "MAYBE"}, "-ERR Invalid OVERFLOW type specified\r\n", ""},
		{[]string{"BITFIELD_RO", "bf", "GET", "u8", "0"}, "*1\r\n:255\r\n", ""},
		{[]string{"BITFIELD_RO", "bf", "SET", "u8", "0", "1"}, "-ERR BITFIELD_RO only supports the GET subcommand\r\n", ""},
		{[]string{"LCS", "k1", "k2"}, "$1\r\na\r\n", ""},
		{[]string{"LCS", "k1", "k2", "LEN"}, ":1\r\n", ""},
		{[]string{"LCS", "k1", "k2", "IDX", "MINMATCHLEN", "1", "WITHMATCHLEN"}, "*4\r\n$7\r\nmatches\r\n*1\r\n*3\r\n*2\r\n:4\r\n:4\r\n*2\r\n:0\r\n:0\r\n:1\r\n$3\r\nlen\r\n:1\r\n", "%2\r\n$7\r\nmatches\r\n*1\r\n*3\r\n*2\r\n:4\r\n:4\r\n*2\r\n:0\r\n:0\r\n:1\r\n$3\r\nlen\r\n:1\r\n"},
		{[]string{"LCS", "k1", "k2", "IDX", "LEN"}, "-ERR If you want both the length and indexes, please just use IDX.\r\n", ""},
		{[]string{"RENAME", "k1", "k3"}, "+OK\r\n", ""},
		{[]string{"RENAME", "k1", "k3"}, "-ERR no such key\r\n", ""},
		{[]string{"RENAMENX", "k3", "k2"}, ":0\r\n", ""},
		{[]string{"RENAMENX", "k3", "k4"}, ":1\r\n", ""},
		{[]string{"COPY", "k4", "k5"}, ":1\r\n", ""},
		{[]string{"COPY", "k4", "k5"}, ":0\r\n", ""},
		{[]string{"COPY", "k4", "k5", "REPLACE"}, ":1\r\n", ""},
		{[]string{"COPY", "k4", "k5", "DB", "1"}, "-ERR DB index is out of range\r\n", ""},
		{[]string{"COPY", "k4", "k4"}, "-ERR source and destination objects are the same\r\n", ""},
		{[]string{"EXISTS", "k4", "k4", "nokey"}, ":2\r\n", ""},
		{[]string{"DBSIZE"}, ":7\r\n", ""},
		{[]string{"KEYS", "k[4-5]"}, "*2\r\n$2\r\nk4\r\n$2\r\nk5\r\n", ""},
		{[]string{"KEYS", "nomatch*"}, "*0\r\n", ""},
		{[]string{"SCAN", "0", "MATCH", "k5", "COUNT", "1000"}, "*2\r\n$1\r\n0\r\n*1\r\n$2\r\nk5\r\n", ""},
		{[]string{"SCAN", "0", "TYPE", "hash"}, "*2\r\n$1\r\n0\r\n*0\r\n", ""},
		{[]string{"SCAN", "abc"}, "-ERR invalid cursor\r\n", ""},
		{[]string{"SCAN", "0", "COUNT", "0"}, "-ERR syntax error\r\n", ""},
	}
	for _, proto := range []string{"2", "3"} {
		raw := dialRaw(t, srv.Addr)
		raw.send(command("FLUSHALL"))
		raw.expectBytes("+OK\r\n")
		raw.send(command("HELLO", proto))
		raw.read()
		for _, step := range script {
			want := step.resp2
			if proto == "3" && step.resp3 != "" {
				want = step.resp3
			}
			raw.send(command(step.args...))
			raw.expectBytes(want)
		}
		raw.send(command("RANDOMKEY"))
		if k := raw.read().String(); !slices.Contains([]string{`"r"`, `"b"`, `"k2"`, `"dest"`, `"bf"`, `"k3"`, `"k4"`, `"k5"`}, k) {
			t.Fatalf("RANDOMKEY = %s, not a key of the store", k)
		}
		raw.send(command("FLUSHALL"))
		raw.expectBytes("+OK\r\n")
		raw.send(command("RANDOMKEY"))
		raw.expectBytes(map[string]string{"2": "$-1\r\n", "3": "_\r\n"}[proto])
	}
}

// TestScanGoRedis scans with go-redis's Scan and ScanIterator while
// another client adds and removes other keys: every key present all along
// is returned, and MATCH and TYPE filter as in Redis.
func TestScanGoRedis(t *testing.T) {
	srv := start(t, server.Config{})
	rdb := newClient(t, srv.Addr, nil)
	c := ctx(t)
	const stable = 500
	pipe := rdb.Pipeline()
	for i := range stable {
		pipe.Set(c, fmt.Sprintf("stable:%d", i), "v", 0)
	}
	if _, err := pipe.Exec(c); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		writer := newClient(t, srv.Addr, nil)
		for i := 0; i < 5000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			k := fmt.Sprintf("churn:%d", i%300)
			if i%2 == 0 {
				writer.Set(c, k, "x", 0)
			} else {
				writer.Del(c, k)
			}
		}
	}()
	seen := map[string]bool{}
	iter := rdb.Scan(c, 0, "stable:*", 7).Iterator()
	for i := 0; iter.Next(c); i++ {
		if i > 100*stable {
			t.Fatal("ScanIterator did not end")
		}
		seen[iter.Val()] = true
	}
	close(stop)
	wg.Wait()
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if len(seen) != stable {
		t.Fatalf("ScanIterator MATCH stable:* returned %d distinct keys, want %d", len(seen), stable)
	}

	var all []string
	cursor := uint64(0)
	for i := 0; ; i++ {
		if i > stable {
			t.Fatal("SCAN TYPE string did not end")
		}
		keys, next, err := rdb.ScanType(c, cursor, "stable:1?", 50, "string").Result()
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, keys...)
		if cursor = next; cursor == 0 {
			break
		}
	}
	sort.Strings(all)
	want := []string{}
	for i := 10; i < 20; i++ {
		want = append(want, fmt.Sprintf("stable:%d", i))
	}
	if !slices.Equal(all, want) {
		t.Fatalf("SCAN MATCH stable:1? TYPE string = %v, want %v", all, want)
	}
	if keys, _, err := rdb.ScanType(c, 0, "*", 1000, "list").Result(); err != nil || len(keys) != 0 {
		t.Fatalf("SCAN TYPE list = %v, %v; want none: every value is a string", keys, err)
	}
	if keys, err := rdb.Keys(c, "stable:4[0-2]").Result(); err != nil || !slices.Equal(keys, []string{"stable:40", "stable:41", "stable:42"}) {
		t.Fatalf("KEYS stable:4[0-2] = %v, %v", keys, err)
	}
	if err := rdb.Do(c, "SCAN", "0", "COUNT", "-1").Err(); errText(err) != "ERR syntax error" {
		t.Fatalf("SCAN COUNT -1: %v", err)
	}
	if _, err := rdb.RandomKey(c).Result(); err != nil && err != redis.Nil {
		t.Fatal(err)
	}
}

// TestKeyspaceShardRouting: on a data node of group 2 (see
// TestShardRouting for its keys' slots), the multi-key commands need all
// their keys in one slot, which the node serves; SCAN and KEYS answer for
// the node's own keys.
func TestKeyspaceShardRouting(t *testing.T) {
	f := newFakeShard(t)
	f.mu.lead = 1
	f.Local = server.Local{S: store.New(store.Options{})}
	c := dialRaw(t, servertest.StartBackend(t, server.Config{}, f).Addr)
	const crossSlot = "(error) CROSSSLOT Keys in request don't hash to the same slot"
	for _, tc := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"SET", "c", "ab"}, `"OK"`},
		{[]string{"RENAME", "c", "{c}x"}, `"OK"`},
		{[]string{"RENAME", "{c}x", "b"}, crossSlot},
		{[]string{"COPY", "{c}x", "c"}, "1"},
		{[]string{"COPY", "c", "b"}, crossSlot},
		{[]string{"BITOP", "AND", "c", "{c}x"}, "2"},
		{[]string{"BITOP", "AND", "c", "b"}, crossSlot},
		{[]string{"BITOP", "OR", "b", "b"}, "(error) MOVED 3300 127.0.0.1:7102"},
		{[]string{"LCS", "c", "b"}, crossSlot},
		{[]string{"LCS", "c", "{c}x"}, `"ab"`},
		{[]string{"SETRANGE", "a", "0", "x"}, "(error) MOVED 15495 127.0.0.1:7301"},
		{[]string{"FLINT.SEQ", "1", "1", "1", "BITOP", "NOT", "b", "c"}, crossSlot},
		{[]string{"KEYS", "*"}, `["c" "{c}x"]`},
		{[]string{"SCAN", "0", "COUNT", "100", "MATCH", "{c}*"}, `["0" ["{c}x"]]`},
	} {
		if got := c.do(tc.cmd...).String(); got != tc.want {
			t.Errorf("%q = %s, want %s", tc.cmd, got, tc.want)
		}
	}
}

// TestBitfieldReadPipelined: a BITFIELD of GETs is a read, served in order
// after the writes pipelined before it.
func TestBitfieldReadPipelined(t *testing.T) {
	srv := start(t, server.Config{})
	raw := dialRaw(t, srv.Addr)
	raw.send(command("SET", "bp", "x") + command("BITFIELD", "bp", "GET", "u8", "0") + command("SETBIT", "bp", "7", "1") +
		command("BITFIELD_RO", "bp", "GET", "u8", "0") + command("GETRANGE", "bp", "0", "-1"))
	raw.expectBytes("+OK\r\n*1\r\n:120\r\n:0\r\n*1\r\n:121\r\n$1\r\ny\r\n")
}
