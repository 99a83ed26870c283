package check

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/flintkv/flint/client"
)

// replyKind is the kind of a reply, reduced to what the model predicts.
type replyKind uint8

const (
	// replyNone means no reply came: the outcome is unknown. It is the
	// zero value, so an op without a reply has an unknown outcome.
	replyNone replyKind = iota
	replyNil
	replyStr // simple and bulk strings alike
	replyInt
	replyArr
	replyErr
)

// reply is a server's reply.
type reply struct {
	kind  replyKind
	str   string // replyStr: the string; replyErr: the message
	num   int64  // replyInt
	elems []reply
}

// Replies the model predicts.
var (
	nilReply = reply{kind: replyNil}
	okReply  = reply{kind: replyStr, str: "OK"}
	// The line client's answers to PUT and DELETE (package lineclient).
	foundReply    = reply{kind: replyStr, str: "found"}
	notFoundReply = reply{kind: replyStr, str: "not_found"}
)

func strReply(s string) reply { return reply{kind: replyStr, str: s} }
func intReply(n int64) reply  { return reply{kind: replyInt, num: n} }
func errReply(m string) reply { return reply{kind: replyErr, str: m} }

// The error replies the model predicts, as Flint (and Redis) word them.
const (
	errNotInteger = "ERR value is not an integer or out of range"
	errOverflow   = "ERR increment or decrement would overflow"
)

// fromValue converts a client reply. Kinds the workload's commands never
// get back are kept as strings, so that the model rejects them.
func fromValue(v client.Value) reply {
	switch v.Kind {
	case client.KindNull:
		return nilReply
	case client.KindInt, client.KindBool:
		return intReply(v.Int)
	case client.KindError:
		return errReply(string(v.Str))
	case client.KindArray, client.KindSet, client.KindMap:
		r := reply{kind: replyArr, elems: make([]reply, len(v.Elems))}
		for i, e := range v.Elems {
			r.elems[i] = fromValue(e)
		}
		return r
	}
	return strReply(string(v.Str))
}

func (r reply) equal(o reply) bool {
	if r.kind != o.kind || r.str != o.str || r.num != o.num || len(r.elems) != len(o.elems) {
		return false
	}
	for i := range r.elems {
		if !r.elems[i].equal(o.elems[i]) {
			return false
		}
	}
	return true
}

// IsZero reports whether r is no reply, for the omitzero JSON option.
func (r reply) IsZero() bool { return r.kind == replyNone }

// String formats r for people: nil, "string", 12, [..], (error) message.
func (r reply) String() string {
	switch r.kind {
	case replyNone:
		return "?"
	case replyNil:
		return "nil"
	case replyStr:
		return strconv.Quote(r.str)
	case replyInt:
		return strconv.FormatInt(r.num, 10)
	case replyErr:
		return "(error) " + r.str
	}
	parts := make([]string, len(r.elems))
	for i, e := range r.elems {
		parts[i] = e.String()
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// MarshalJSON writes r as the history format documents: null, a string, a
// number, an array, or {"err": message}.
func (r reply) MarshalJSON() ([]byte, error) {
	switch r.kind {
	case replyNil:
		return []byte("null"), nil
	case replyStr:
		return json.Marshal(r.str)
	case replyInt:
		return strconv.AppendInt(nil, r.num, 10), nil
	case replyErr:
		return json.Marshal(struct {
			Err string `json:"err"`
		}{r.str})
	case replyArr:
		elems := r.elems
		if elems == nil {
			elems = []reply{}
		}
		return json.Marshal(elems)
	}
	return nil, fmt.Errorf("%w: no reply to write", ErrHistory)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *reply) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0:
		return fmt.Errorf("%w: empty reply", ErrHistory)
	case string(b) == "null":
		*r = nilReply
		return nil
	case b[0] == '"':
		*r = reply{kind: replyStr}
		return json.Unmarshal(b, &r.str)
	case b[0] == '[':
		*r = reply{kind: replyArr}
		return json.Unmarshal(b, &r.elems)
	case b[0] == '{':
		var e struct {
			Err *string `json:"err"`
		}
		if err := json.Unmarshal(b, &e); err != nil || e.Err == nil {
			return fmt.Errorf("%w: reply %s is not {\"err\": message}", ErrHistory, b)
		}
		*r = errReply(*e.Err)
		return nil
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("%w: reply %s is not null, a string, an integer, an array or an error", ErrHistory, b)
	}
	*r = intReply(n)
	return nil
}
