package server

import (
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/flintkv/flint/internal/protocol"
	"github.com/flintkv/flint/internal/store"
)

// keyspaceCommands list, rename and copy keys. SCAN, KEYS and RANDOMKEY
// have no keys: in a sharded cluster they answer for the keys of the
// member's group, as a Redis Cluster node does for its own.
var keyspaceCommands = []*command{
	{name: "scan", arity: -2, flags: "readonly", run: (*conn).scan},
	{name: "keys", arity: 2, flags: "readonly", run: (*conn).keys},
	{name: "randomkey", arity: 1, flags: "readonly", run: (*conn).randomkey},
	{name: "rename", arity: 3, flags: "write", first: 1, last: 2, step: 1, run: (*conn).rename},
	{name: "renamenx", arity: 3, flags: "write fast", first: 1, last: 2, step: 1, run: (*conn).renamenx},
	{name: "copy", arity: -3, flags: "write denyoom", first: 1, last: 2, step: 1, run: (*conn).copyCmd},
}

// maxScanCount bounds what one SCAN visits, whatever its COUNT: COUNT is
// a hint in Redis too, and a larger one would only make the server buffer
// more keys for one reply.
const maxScanCount = 10000

// scan is SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]: see
// store.Scan for the cursor and its guarantee. It replies with the next
// cursor and the keys it visited that match; every key is a string, so
// TYPE keeps them all or none.
func (c *conn) scan(args [][]byte) {
	cursor, ok := parseCursor(args[1])
	if !ok {
		c.err("ERR invalid cursor")
		return
	}
	count, pattern, keepAll := int64(10), []byte(nil), true
	for i := 2; i < len(args); i += 2 {
		if i+1 >= len(args) {
			c.errSyntax()
			return
		}
		switch strings.ToLower(string(args[i])) {
		case "count":
			if count, ok = intArg(args[i+1]); !ok {
				c.errNotInt()
				return
			}
			if count < 1 {
				c.errSyntax()
				return
			}
		case "match":
			pattern = args[i+1]
		case "type":
			keepAll = strings.EqualFold(string(args[i+1]), "string")
		default:
			c.errSyntax()
			return
		}
	}
	s, ok := c.read()
	if !ok {
		return
	}
	var keys []string
	match := matcher(pattern)
	next := s.Scan(cursor, int(min(count, maxScanCount)), func(k string) {
		if keepAll && match(k) {
			keys = append(keys, k)
		}
	})
	c.out = protocol.AppendArray(c.out, 2)
	c.bulkString(strconv.FormatUint(next, 10))
	c.out = protocol.AppendArray(c.out, len(keys))
	for _, k := range keys {
		c.bulkString(k)
	}
}

// matcher returns the test of a key against a KEYS or SCAN MATCH pattern
// (nil for none). For the pattern "*" Redis skips matching and takes every
// key, the empty one too, which globMatch of "*" does not match.
func matcher(pattern []byte) func(k string) bool {
	if pattern == nil || (len(pattern) == 1 && pattern[0] == '*') {
		return func(string) bool { return true }
	}
	return func(k string) bool { return globMatch(pattern, []byte(k)) }
}

// parseCursor parses a SCAN cursor as Redis does (strtoull): an unsigned
// 64-bit decimal, which a '-' negates modulo 2^64.
func parseCursor(b []byte) (uint64, bool) {
	s, neg := string(b), false
	if strings.HasPrefix(s, "-") || strings.HasPrefix(s, "+") {
		s, neg = s[1:], s[0] == '-'
	}
	if s == "" || s[0] < '0' || s[0] > '9' { // strtoull's own sign would not follow one
		return 0, false
	}
	x, err := strconv.ParseUint(s, 10, 64)
	if neg {
		x = -x
	}
	return x, err == nil
}

// keys is KEYS pattern: every key that matches, in byte order. Like RANGE
// it reads a snapshot twice, counting and then sending the keys, so that
// the reply streams out under the output limits rather than being built
// whole; the keys of a large store are a large reply, in Redis too.
func (c *conn) keys(args [][]byte) {
	s, ok := c.read()
	if !ok {
		return
	}
	snap := s.Snapshot()
	match := matcher(args[1])
	n := 0
	snap.AscendLive(func(k string, _ []byte) bool {
		if match(k) {
			n++
		}
		return true
	})
	c.out = protocol.AppendArray(c.out, n)
	if n == 0 {
		return
	}
	snap.AscendLive(func(k string, _ []byte) bool {
		if match(k) {
			c.bulkString(k)
			c.maybeFlush()
			n--
		}
		return n > 0 && !c.quit
	})
}

// randomkey is RANDOMKEY: the key at a random place in the scan order, or
// after it, or the first; null if there is none.
func (c *conn) randomkey([][]byte) {
	s, ok := c.read()
	if !ok {
		return
	}
	var key string
	found := false
	take := func(k string) { key, found = k, true }
	if s.Scan(rand.Uint64(), 1, take); !found {
		s.Scan(0, 1, take)
	}
	if !found {
		c.null()
		return
	}
	c.bulkString(key)
}

func (c *conn) rename(args [][]byte) {
	c.write(store.OpRename, 0, replyOK, args[1], args[2])
}

func (c *conn) renamenx(args [][]byte) {
	c.write(store.OpRename, store.RenameNX, replyBool, args[1], args[2])
}

// copyCmd is COPY source destination [DB destination-db] [REPLACE]. Flint
// has one database, 0.
func (c *conn) copyCmd(args [][]byte) {
	var flags byte
	for i := 3; i < len(args); i++ {
		switch opt := strings.ToLower(string(args[i])); {
		case opt == "replace":
			flags |= store.CopyReplace
		case opt == "db" && i+1 < len(args):
			db, ok := intArg(args[i+1])
			switch {
			case !ok || db != int64(int32(db)):
				c.errNotInt()
				return
			case db != 0:
				c.err("ERR DB index is out of range")
				return
			}
			i++
		default:
			c.errSyntax()
			return
		}
	}
	if string(args[1]) == string(args[2]) {
		c.err("ERR source and destination objects are the same")
		return
	}
	c.write(store.OpCopy, flags, replyBool, args[1], args[2])
}
