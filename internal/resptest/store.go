package resptest

import (
	"slices"
	"strings"

	"github.com/flintkv/flint/internal/protocol"
)

// Store is a tiny key-value state that answers, as Flint does, the commands
// the line client sends: GET, SET (with GET), SWAP, DEL and RANGE, and
// PING. Anything else, CLUSTER included, gets an unknown-command error, as
// from a server without cluster support. Its Handle method is a Handler; a
// Store is not safe for concurrent use other than through one Server.
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
	case name == "RANGE" && len(args) == 3:
		return st.rangeReply(args[1], args[2])
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
// values, alternating, in key order.
func (st Store) rangeReply(start, end string) string {
	var keys []string
	for k := range st {
		if start <= k && k <= end {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	b := protocol.AppendArray(nil, 2*len(keys))
	for _, k := range keys {
		b = protocol.AppendBulkString(protocol.AppendBulkString(b, k), st[k])
	}
	return string(b)
}
