package check

import (
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"
)

// cell is the model's state of one key. Its zero value is an absent key.
// Invariant: only a present cell has a deadline other than noDeadline, so
// that equal states are equal cells.
type cell struct {
	val   string // when present
	state cellState
	// deadline is whether the key has one, when present. The model never
	// lets one pass: the workload's EXPIRE is far longer than any run, so
	// replies do not depend on timing (keys vanishing is checked by the
	// store's TestExpiryModel and the replica's TestClusterExpiry).
	deadline deadlineState
}

// value returns the cell of a key that holds v, with no deadline: what
// SET, GETSET, SWAP, CAS and MSET leave, as in Redis.
func value(v string) cell { return cell{val: v, state: present} }

// sameValue reports whether c and d hold the same value or none,
// whatever their deadlines.
func (c cell) sameValue(d cell) bool { return c.state == d.state && c.val == d.val }

type cellState uint8

const (
	absent cellState = iota
	present
	// unknownCell is any value or none. Only windows of a history that do
	// not start at its beginning (see shrink.go) start with unknown cells;
	// an operation that reveals the key's value makes it known again.
	unknownCell
)

var unknownKey = cell{state: unknownCell}

type deadlineState uint8

const (
	noDeadline deadlineState = iota
	hasDeadline
	// unknownDeadline: a present key, known from a reply that showed its
	// value but not whether it has a deadline (only in windows that start
	// with unknown cells).
	unknownDeadline
)

// maxTTL is the largest EXPIRE the history format takes, in seconds, and
// so the largest TTL a key may have; minExpire the smallest, longer than
// any run, so that no key expires during one.
const (
	maxTTL    = 1_000_000
	minExpire = 86_400
)

// input is a command bound to the cells of the part of the history it is
// checked in. The model's state is a []cell, one per key of the part.
type input struct {
	command
	// cells are the cells of the keys named (for RANGE: of every key of
	// the history in the range, in key order).
	cells []int
	// names are the keys of cells, for RANGE, whose reply names them.
	names []string
	// anyCount: DEL's reply is not checked (see narrow).
	anyCount bool
	// limited: keys after the last pair of RANGE's reply are not
	// constrained, as when the reply reaches the LIMIT. A RANGE cut down to
	// some of its keys (shrink.go) keeps this from the whole reply.
	limited bool
	// subs are MULTI's queued commands, bound to the part's cells.
	subs []*input
	text string // the command as sent, for people
}

// stateSeed seeds the hashes of states, which porcupine compares only
// within one process.
var stateSeed = maphash.MakeSeed()

// newModel returns the model of a part with n keys that start absent, or
// unknown if unknownStart.
func newModel(describe func([]cell) string, n int, unknownStart bool) porcupine.Model {
	return porcupine.Model{
		Init: func() any {
			s := make([]cell, n)
			if unknownStart {
				for i := range s {
					s[i] = unknownKey
				}
			}
			return s
		},
		Step: func(state, in, out any) (bool, any) {
			return step(state.([]cell), in.(*input), out.(*reply))
		},
		Equal: func(a, b any) bool { return slices.Equal(a.([]cell), b.([]cell)) },
		Hash: func(state any) uint64 {
			var h maphash.Hash
			h.SetSeed(stateSeed)
			for _, c := range state.([]cell) {
				h.WriteByte(byte(c.state))
				h.WriteByte(byte(c.deadline))
				h.WriteString(c.val)
			}
			return h.Sum64()
		},
		DescribeOperation: func(in, out any) string { return in.(*input).text + " → " + out.(*reply).String() },
		DescribeState:     func(state any) string { return describe(state.([]cell)) },
		DescribeOperationMetadata: func(m any) string {
			ref := m.(opRef)
			if ref.relaxed {
				return fmt.Sprintf("ops[%d] of the history, its reply ignored (shrink.go)", ref.index)
			}
			return fmt.Sprintf("ops[%d] of the history", ref.index)
		},
	}
}

// step is the sequential specification: whether a store in state s could
// answer in with out, and its state after. It never modifies s. An out of
// replyNone (unknown outcome) is any answer: the command is applied as it
// would be, and where that depends on an unknown cell the cell stays
// unknown.
func step(s []cell, in *input, out *reply) (bool, []cell) {
	if out.kind == replyNone {
		return true, blind(s, in)
	}
	switch in.kind {
	case kindGet:
		c, ok := observe(s[in.cells[0]], *out)
		return ok, with(s, in.cells[0], c)
	case kindSet:
		return stepSet(s, in, *out)
	case kindSwap:
		_, ok := observe(s[in.cells[0]], *out)
		return ok, with(s, in.cells[0], value(in.vals[0]))
	case kindCAS:
		return stepCAS(s, in, *out)
	case kindDel:
		return stepDel(s, in, *out)
	case kindIncr:
		return stepIncr(s, in, *out)
	case kindMSet:
		if !out.equal(okReply) {
			return false, s
		}
		return true, blind(s, in)
	case kindMGet:
		return stepMGet(s, in, *out)
	case kindRange:
		return stepRange(s, in, *out)
	case kindPut:
		return stepFound(s, in, *out, value(in.vals[0]))
	case kindDelete:
		return stepFound(s, in, *out, cell{})
	case kindMulti:
		return stepMulti(s, in, *out)
	case kindExpire:
		return stepExpire(s, in, *out)
	case kindPersist:
		return stepPersist(s, in, *out)
	case kindTTL:
		return stepTTL(s, in, *out)
	}
	return false, s
}

// stepMulti checks EXEC's reply: the queued commands applied one after the
// other, at one instant, each reply in its place.
func stepMulti(s []cell, in *input, out reply) (bool, []cell) {
	if out.kind != replyArr || len(out.elems) != len(in.subs) {
		return false, s
	}
	for j, sub := range in.subs {
		ok, next := step(s, sub, &out.elems[j])
		if !ok {
			return false, s
		}
		s = next
	}
	return true, s
}

// with returns s with cell i set to c, copying s only if that changes it.
func with(s []cell, i int, c cell) []cell {
	if s[i] == c {
		return s
	}
	s = slices.Clone(s)
	s[i] = c
	return s
}

// observe checks a reply that shows a key's value (nil or a string)
// against the key's cell, and returns the cell as the reply shows it; a
// present key keeps its deadline, which the reply does not show.
func observe(c cell, r reply) (cell, bool) {
	switch {
	case r.kind == replyNil:
		return cell{}, c.state != present
	case r.kind != replyStr:
		return c, false
	case c.state == unknownCell:
		return cell{val: r.str, state: present, deadline: unknownDeadline}, true
	}
	return c, c.state == present && c.val == r.str
}

// withDeadline returns s with key i's deadline set to d if the key is
// present; an absent or unknown key has none to set.
func withDeadline(s []cell, i int, d deadlineState) []cell {
	c := s[i]
	if c.state != present {
		return s
	}
	c.deadline = d
	return with(s, i, c)
}

// blind applies in without knowing its reply.
func blind(s []cell, in *input) []cell {
	switch in.kind {
	case kindSet:
		switch c := s[in.cells[0]]; {
		case notSet(in, c):
			return s
		case (in.nx || in.xx) && c.state == unknownCell:
			return s // set or not: unknown either way
		}
		return with(s, in.cells[0], value(in.vals[0]))
	case kindSwap, kindPut:
		return with(s, in.cells[0], value(in.vals[0]))
	case kindDelete:
		return with(s, in.cells[0], cell{})
	case kindCAS:
		switch c := s[in.cells[0]]; {
		case c.state == unknownCell:
			return s
		case c.sameValue(value(in.vals[0])):
			return with(s, in.cells[0], value(in.vals[1]))
		}
		return s
	case kindDel:
		for _, i := range in.cells {
			s = with(s, i, cell{})
		}
		return s
	case kindIncr:
		c := s[in.cells[0]]
		if c.state == unknownCell {
			return s
		}
		_, next := incr(c)
		return with(s, in.cells[0], next)
	case kindMSet:
		for j, i := range in.cells {
			s = with(s, i, value(in.vals[j]))
		}
		return s
	case kindMulti: // all of it: it is atomic
		for _, sub := range in.subs {
			s = blind(s, sub)
		}
		return s
	case kindExpire:
		return withDeadline(s, in.cells[0], hasDeadline)
	case kindPersist:
		return withDeadline(s, in.cells[0], noDeadline)
	}
	return s // reads change nothing
}

func stepSet(s []cell, in *input, out reply) (bool, []cell) {
	i := in.cells[0]
	if in.get { // the reply is the old value, which decides NX and XX
		old, ok := observe(s[i], out)
		switch {
		case !ok:
			return false, s
		case notSet(in, old):
			return true, with(s, i, old)
		}
		return true, with(s, i, value(in.vals[0]))
	}
	old := s[i]
	switch {
	case out.equal(okReply):
		return !notSet(in, old), with(s, i, value(in.vals[0]))
	case out.kind == replyNil && in.nx: // the key was there
		return old.state != absent, s
	case out.kind == replyNil && in.xx: // the key was not there
		return old.state != present, with(s, i, cell{})
	}
	return false, s
}

// notSet reports whether NX or XX keeps SET from writing a key whose
// cell is c.
func notSet(in *input, c cell) bool {
	return in.nx && c.state == present || in.xx && c.state == absent
}

// stepFound checks the line client's found or not_found (PUT's and
// DELETE's reply) against whether the key had a value, and leaves the key
// as after.
func stepFound(s []cell, in *input, out reply, after cell) (bool, []cell) {
	i := in.cells[0]
	var found bool
	switch {
	case out.equal(foundReply):
		found = true
	case out.equal(notFoundReply):
	default:
		return false, s
	}
	c := s[i]
	return c.state == unknownCell || (c.state == present) == found, with(s, i, after)
}

func stepCAS(s []cell, in *input, out reply) (bool, []cell) {
	i := in.cells[0]
	c, expected := s[i], value(in.vals[0])
	switch {
	case out.kind != replyInt || out.num < 0 || out.num > 1:
		return false, s
	case out.num == 1:
		return c.state == unknownCell || c.sameValue(expected), with(s, i, value(in.vals[1]))
	}
	return !c.sameValue(expected), s
}

func stepDel(s []cell, in *input, out reply) (bool, []cell) {
	if out.kind != replyInt {
		return false, s
	}
	var known, maybe int64
	for _, i := range in.cells {
		switch s[i].state {
		case present:
			known++
		case unknownCell:
			maybe++
		}
	}
	return in.anyCount || known <= out.num && out.num <= known+maybe, blind(s, in)
}

func stepIncr(s []cell, in *input, out reply) (bool, []cell) {
	i := in.cells[0]
	c := s[i]
	if c.state == unknownCell {
		switch {
		case out.kind == replyInt:
			return true, with(s, i, cell{val: strconv.FormatInt(out.num, 10), state: present, deadline: unknownDeadline})
		case out.equal(errReply(errNotInteger)), out.equal(errReply(errOverflow)):
			return true, s
		}
		return false, s
	}
	want, next := incr(c)
	return out.equal(want), with(s, i, next)
}

// incr returns INCR's reply on a known cell and the cell after it, as
// Redis defines it: a missing key counts as 0; a value that is not a
// canonical base-10 int64 is an error. INCR keeps the key's deadline.
func incr(c cell) (reply, cell) {
	var n int64
	if c.state == present {
		var err error
		n, err = strconv.ParseInt(c.val, 10, 64)
		if err != nil || strconv.FormatInt(n, 10) != c.val {
			return errReply(errNotInteger), c
		}
	}
	if n == math.MaxInt64 {
		return errReply(errOverflow), c
	}
	return intReply(n + 1), cell{val: strconv.FormatInt(n+1, 10), state: present, deadline: c.deadline}
}

// stepExpire checks EXPIRE's reply: 1 if the key is there (it then has a
// deadline), 0 if not.
func stepExpire(s []cell, in *input, out reply) (bool, []cell) {
	i := in.cells[0]
	switch {
	case out.equal(intReply(1)):
		return s[i].state != absent, withDeadline(s, i, hasDeadline)
	case out.equal(intReply(0)):
		return s[i].state != present, with(s, i, cell{})
	}
	return false, s
}

// stepPersist checks PERSIST's reply: 1 if the key had a deadline, which
// it then lost, 0 if it had none or is not there.
func stepPersist(s []cell, in *input, out reply) (bool, []cell) {
	i := in.cells[0]
	c := s[i]
	switch {
	case out.equal(intReply(1)):
		return c.state == unknownCell || c.state == present && c.deadline != noDeadline, withDeadline(s, i, noDeadline)
	case out.equal(intReply(0)):
		return c.state != present || c.deadline != hasDeadline, withDeadline(s, i, noDeadline)
	}
	return false, s
}

// stepTTL checks TTL's reply by its class only: -2 if the key is not
// there, -1 if it has no deadline, else the seconds left, which the model
// does not know but are at most maxTTL (and more than 0: no deadline
// passes during a run).
func stepTTL(s []cell, in *input, out reply) (bool, []cell) {
	i := in.cells[0]
	c := s[i]
	switch {
	case out.kind != replyInt:
		return false, s
	case out.num == -2:
		return c.state != present, with(s, i, cell{})
	case out.num == -1:
		return c.state == unknownCell || c.state == present && c.deadline != hasDeadline, withDeadline(s, i, noDeadline)
	case 0 < out.num && out.num <= maxTTL:
		return c.state == unknownCell || c.state == present && c.deadline != noDeadline, withDeadline(s, i, hasDeadline)
	}
	return false, s
}

func stepMGet(s []cell, in *input, out reply) (bool, []cell) {
	if out.kind != replyArr || len(out.elems) != len(in.cells) {
		return false, s
	}
	for j, i := range in.cells {
		c, ok := observe(s[i], out.elems[j])
		if !ok {
			return false, s
		}
		s = with(s, i, c)
	}
	return true, s
}

// stepRange matches RANGE's flat key, value, ... reply against the cells in
// the range, in key order. With a LIMIT that the reply reaches, the keys
// after the last one returned are not constrained.
func stepRange(s []cell, in *input, out reply) (bool, []cell) {
	if out.kind != replyArr || len(out.elems)%2 != 0 {
		return false, s
	}
	pairs := len(out.elems) / 2
	cut := in.limited || in.limit > 0 && pairs == in.limit
	p := 0 // the next pair of the reply to match
	for j, i := range in.cells {
		if p < pairs && out.elems[2*p].equal(strReply(in.names[j])) {
			c, ok := observe(s[i], out.elems[2*p+1])
			if !ok || c.state != present {
				return false, s
			}
			s, p = with(s, i, c), p+1
			continue
		}
		if p == pairs && cut {
			break
		}
		switch s[i].state {
		case present:
			return false, s
		case unknownCell:
			s = with(s, i, cell{})
		}
	}
	return p == pairs, s
}

// describeCells formats a state for the visualization: each key by the
// part of its name after prefix, = its value, nil or ?, and " ttl" if it
// has a deadline (" ttl?" if that is unknown).
func describeCells(keys []string, prefix string) func([]cell) string {
	return func(s []cell) string {
		var b strings.Builder
		for i, c := range s {
			if i > 0 {
				b.WriteString(" ")
			}
			b.WriteString(strings.TrimPrefix(keys[i], prefix))
			switch c.state {
			case absent:
				b.WriteString("=nil")
			case present:
				b.WriteString("=" + strconv.Quote(c.val) + [...]string{"", " ttl", " ttl?"}[c.deadline])
			default:
				b.WriteString("=?")
			}
		}
		return b.String()
	}
}
