package resptest

import (
	"slices"
	"strconv"
	"strings"

	"github.com/flintkv/flint/internal/protocol"
)

// Store is a tiny key-value state that answers, as Flint does, the commands
// the line client sends: GET, SET (with GET), SWAP, DEL and RANGE (with
// LIMIT), and PING; and MGET, EXISTS, MSET and INCR. Anything else,
// CLUSTER included, gets an unknown-command error, as from a server without
// cluster support. Its Handle method is a Handler; a Store is not safe for
// concurrent use other than through one Server.
type Store map[string]string

// Handle answers one command.
func (st Store) Handle(args []string) string {
	name := strings.ToUpper(args[0])
	switch {
	case name == "PING":
		return "+PONG\r\n"
	case name == "GET" && len(args) == 2:
		return st.value(args[1])
	case name == "SET" && len(args) == 4 && strings.EqualFold(args[3], "GET"), name == "SWAP" && len(args) == 3:
		old := st.value(args[1])
		st[args[1]] = args[2]
		return old
	case name == "SET" && len(args) == 3:
		st[args[1]] = args[2]
		return OK
	case name == "DEL" && len(args) >= 2:
		n := 0
		for _, k := range args[1:] {
			if _, ok := st[k]; ok {
				delete(st, k)
				n++
			}
		}
		return Int(int64(n))
	case name == "MGET" && len(args) >= 2:
		vals := make([]string, len(args)-1)
		for i, k := range args[1:] {
			vals[i] = st.value(k)
		}
		return Array(vals...)
	case name == "EXISTS" && len(args) >= 2:
		n := 0
		for _, k := range args[1:] {
			if _, ok := st[k]; ok {
				n++
			}
		}
		return Int(int64(n))
	case name == "MSET" && len(args) >= 3 && len(args)%2 == 1:
		for i := 1; i < len(args); i += 2 {
			st[args[i]] = args[i+1]
		}
		return OK
	case name == "INCR" && len(args) == 2:
		n, err := strconv.ParseInt(st[args[1]], 10, 64)
		if _, ok := st[args[1]]; ok && err != nil {
			return Err("ERR value is not an integer or out of range")
		}
		st[args[1]] = strconv.FormatInt(n+1, 10)
		return Int(n + 1)
	case name == "RANGE" && len(args) == 3:
		return st.rangeReply(args[1], args[2], -1)
	case name == "RANGE" && len(args) == 5 && strings.EqualFold(args[3], "LIMIT"):
		n, err := strconv.Atoi(args[4])
		if err != nil || n < 0 {
			return Err("ERR LIMIT must be a non-negative integer")
		}
		return st.rangeReply(args[1], args[2], n)
	}
	return Err("ERR unknown command '" + args[0] + "'")
}

func (st Store) value(k string) string {
	if v, ok := st[k]; ok {
		return Bulk(v)
	}
	return Null
}

// rangeReply returns the keys from start to end, both included, and their
// values, alternating, in key order: the first limit of them if limit >= 0.
func (st Store) rangeReply(start, end string, limit int) string {
	var keys []string
	for k := range st {
		if start <= k && k <= end {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if limit >= 0 && len(keys) > limit {
		keys = keys[:limit]
	}
	b := protocol.AppendArray(nil, 2*len(keys))
	for _, k := range keys {
		b = protocol.AppendBulkString(protocol.AppendBulkString(b, k), st[k])
	}
	return string(b)
}
