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

// cell is the model's state of one key.
type cell struct {
	val   string // when present
	state cellState
}

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
		return ok, with(s, in.cells[0], cell{in.vals[0], present})
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
		return stepFound(s, in, *out, cell{in.vals[0], present})
	case kindDelete:
		return stepFound(s, in, *out, cell{})
	case kindMulti:
		return stepMulti(s, in, *out)
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
// against the key's cell, and returns the cell as the reply shows it.
func observe(c cell, r reply) (cell, bool) {
	var seen cell
	switch r.kind {
	case replyNil:
		seen = cell{}
	case replyStr:
		seen = cell{r.str, present}
	default:
		return c, false
	}
	return seen, c.state == unknownCell || c == seen
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
		return with(s, in.cells[0], cell{in.vals[0], present})
	case kindSwap, kindPut:
		return with(s, in.cells[0], cell{in.vals[0], present})
	case kindDelete:
		return with(s, in.cells[0], cell{})
	case kindCAS:
		switch c := s[in.cells[0]]; {
		case c.state == unknownCell:
			return s
		case c == cell{in.vals[0], present}:
			return with(s, in.cells[0], cell{in.vals[1], present})
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
			s = with(s, i, cell{in.vals[j], present})
		}
		return s
	case kindMulti: // all of it: it is atomic
		for _, sub := range in.subs {
			s = blind(s, sub)
		}
		return s
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
		return true, with(s, i, cell{in.vals[0], present})
	}
	old := s[i]
	switch {
	case out.equal(okReply):
		return !notSet(in, old), with(s, i, cell{in.vals[0], present})
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
	c, expected := s[i], cell{in.vals[0], present}
	switch {
	case out.kind != replyInt || out.num < 0 || out.num > 1:
		return false, s
	case out.num == 1:
		return c.state == unknownCell || c == expected, with(s, i, cell{in.vals[1], present})
	}
	return c != expected, s
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
			return true, with(s, i, cell{strconv.FormatInt(out.num, 10), present})
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
// canonical base-10 int64 is an error.
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
	return intReply(n + 1), cell{strconv.FormatInt(n+1, 10), present}
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
// part of its name after prefix, = its value, nil or ?.
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
				b.WriteString("=" + strconv.Quote(c.val))
			default:
				b.WriteString("=?")
			}
		}
		return b.String()
	}
}
