package check

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/anishathalye/porcupine"
)

// part is an independent part of a history: the operations on a set of
// keys that no operation ties to any other key. A history is linearizable
// if and only if each of its parts is.
type part struct {
	name   string
	keys   []string // sorted; cell i of the model's state is keys[i]
	prefix string   // the keys' common prefix up to a '/', left out when describing states
	only   string   // the one key that the ops were narrowed to (see narrow), if any
	// ops are in order of call. Input is *input, Output *reply, Metadata
	// opRef. A write of unknown outcome has Output replyNone, and Return
	// inf unless a reply shows its effect (see bound).
	ops []porcupine.Operation
	// inf is later than every event of the history: an op returning then
	// may take effect any time after its call.
	inf int64
}

// opRef ties a porcupine operation to the history.
type opRef struct {
	index int // in history.Ops
	// unseen: a write of unknown outcome whose effect no reply shows, so
	// that it may as well never have happened (see part.reduced).
	unseen bool
	// relaxed: the op's reply is ignored, as windows ignore those of some
	// writes around them (see shrink.go).
	relaxed bool
}

// splitStats counts what split did not check as recorded.
type splitStats struct {
	droppedReads int // reads of unknown outcome, left out
	errorReplies int // error replies the model does not predict, taken as unknown outcomes
}

// split cuts h into parts: each key alone, except that keys one command
// touches together (MSET, MGET, DEL of several keys, and every key of the
// history inside a RANGE) are in one part.
func split(h *history) ([]*part, splitStats, error) {
	var st splitStats
	cmds := make([]command, len(h.Ops))
	feet := make([][]int, len(h.Ops)) // the keys (indexes into h.Keys) of each op
	uf := newUnionFind(len(h.Keys) + 1)
	none := len(h.Keys) // the root of commands that touch no key, such as an empty RANGE
	for i, o := range h.Ops {
		c, err := parseCommand(o.Cmd)
		if err != nil {
			return nil, st, fmt.Errorf("op %d: %w", i, err)
		}
		foot, err := footprint(h.Keys, c)
		if err != nil {
			return nil, st, fmt.Errorf("op %d: %w", i, err)
		}
		for _, k := range foot {
			uf.union(foot[0], k)
		}
		cmds[i], feet[i] = c, foot
	}
	inf := infinity(h)
	seen := valuesSeen(h, cmds)
	byRoot := make(map[int]*part)
	var parts []*part
	for i, o := range h.Ops {
		root := none
		if len(feet[i]) > 0 {
			root = uf.find(feet[i][0])
		}
		p := byRoot[root]
		if p == nil {
			p = newPart(h.Keys, uf, root)
			p.inf = inf
			byRoot[root] = p
			parts = append(parts, p)
		}
		pop, keep := p.operation(o, i, cmds[i], feet[i], h.Keys, seen, &st)
		if keep {
			p.ops = append(p.ops, pop)
		}
	}
	for _, p := range parts {
		slices.SortStableFunc(p.ops, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	}
	slices.SortFunc(parts, func(a, b *part) int { return cmp.Compare(a.name, b.name) })
	return parts, st, nil
}

// footprint returns the indexes in keys (sorted) of the keys c touches.
func footprint(keys []string, c command) ([]int, error) {
	if c.kind == kindRange {
		lo := sort.SearchStrings(keys, c.keys[0])
		hi := sort.SearchStrings(keys, c.keys[1])
		if hi < len(keys) && keys[hi] == c.keys[1] {
			hi++
		}
		var foot []int
		for i := lo; i < hi; i++ {
			foot = append(foot, i)
		}
		return foot, nil
	}
	foot := make([]int, len(c.keys))
	for j, k := range c.keys {
		i := sort.SearchStrings(keys, k)
		if i == len(keys) || keys[i] != k {
			return nil, fmt.Errorf("%w: key %q is not in the history's keys", ErrHistory, k)
		}
		foot[j] = i
	}
	return foot, nil
}

// infinity is the return time of operations of unknown outcome: later than
// everything in h, so they may take effect any time after their call.
func infinity(h *history) int64 {
	var last int64
	for _, o := range h.Ops {
		last = max(last, o.Return)
	}
	return last + 1
}

// newPart returns the empty part of the keys whose root is root.
func newPart(keys []string, uf unionFind, root int) *part {
	p := &part{}
	for i, k := range keys {
		if uf.find(i) == root {
			p.keys = append(p.keys, k)
		}
	}
	switch len(p.keys) {
	case 0:
		p.name = "(no keys)"
	case 1:
		p.name, p.prefix = p.keys[0], commonDir(p.keys)
	default:
		p.prefix = commonDir(p.keys)
		var short []string
		for _, k := range p.keys {
			short = append(short, strings.TrimPrefix(k, p.prefix))
		}
		p.name = p.prefix + "{" + strings.Join(short, ",") + "}"
	}
	return p
}

// commonDir returns the longest common prefix of keys that ends with '/'.
func commonDir(keys []string) string {
	pre := keys[0]
	for _, k := range keys[1:] {
		n := 0
		for n < len(pre) && n < len(k) && pre[n] == k[n] {
			n++
		}
		pre = pre[:n]
	}
	return pre[:strings.LastIndexByte(pre, '/')+1]
}

// operation turns op o (number index of the history) into the part's
// porcupine operation, and reports whether it is checked at all: a read
// whose outcome is unknown tells nothing and is left out.
func (p *part) operation(o op, index int, c command, foot []int, keys []string, seen map[string]int64, st *splitStats) (porcupine.Operation, bool) {
	in := newInput(c, strings.Join(o.Cmd, " "), keys, foot, p.keys)
	out := o.Reply
	if unknownOutcome(c, out) && out.kind != replyNone {
		st.errorReplies++
		out = reply{}
	}
	ret, ref := o.Return, opRef{index: index}
	if out.kind == replyNone {
		if c.kind.isRead() {
			st.droppedReads++
			return porcupine.Operation{}, false
		}
		ret = bound(o, c, seen, p.inf)
		ref.unseen = ret == p.inf
	}
	return porcupine.Operation{ClientId: o.Client, Input: in, Call: o.Call, Output: &out, Return: ret, Metadata: ref}, true
}

// newInput binds command c (text as sent), whose footprint is foot in
// keys, to the cells of a part whose keys are partKeys.
func newInput(c command, text string, keys []string, foot []int, partKeys []string) *input {
	in := &input{command: c, text: text}
	for _, k := range foot {
		in.cells = append(in.cells, sort.SearchStrings(partKeys, keys[k]))
		if c.kind == kindRange {
			in.names = append(in.names, keys[k])
		}
	}
	for _, sub := range c.subs {
		in.subs = append(in.subs, &input{command: sub, cells: []int{sort.SearchStrings(partKeys, sub.keys[0])}})
	}
	return in
}

// valuesSeen maps each value that only one op of h writes to the earliest
// return of an op whose reply shows it: that names it (GET, MGET, RANGE,
// SWAP, SET ... GET; not SET's OK or PUT's found, whatever their spelling),
// or CAS that found it and replied 1. Values written by
// several ops are left out: seeing them does not tell which write it was.
func valuesSeen(h *history, cmds []command) map[string]int64 {
	writers := make(map[string]int)
	for _, c := range cmds {
		for _, v := range c.written() {
			writers[v]++
		}
	}
	seen := make(map[string]int64)
	see := func(v string, at int64) {
		if t, ok := seen[v]; writers[v] == 1 && (!ok || at < t) {
			seen[v] = at
		}
	}
	var walk func(r reply, at int64)
	walk = func(r reply, at int64) {
		see(r.str, at)
		for _, e := range r.elems {
			walk(e, at)
		}
	}
	for i, o := range h.Ops {
		if cmds[i].showsValues() {
			walk(o.Reply, o.Return)
		}
		if cmds[i].kind == kindCAS && o.Reply.equal(intReply(1)) {
			see(cmds[i].vals[0], o.Return)
		}
	}
	return seen
}

// bound returns the return time to check write o (command c) of unknown
// outcome with. If a reply shows a value that only o writes, o took effect
// before that reply came, so the earliest such reply bounds it. Otherwise
// it is inf: o may take effect any time after its call, or never.
func bound(o op, c command, seen map[string]int64, inf int64) int64 {
	ret := inf
	for _, v := range c.written() {
		if t, ok := seen[v]; ok {
			ret = min(ret, max(t, o.Call))
		}
	}
	return ret
}

// reduced returns p's ops without the writes of unknown outcome that no
// reply shows. If they are linearizable, so is p: those writes can come
// last, after everything, where they change nothing that was read. It is
// cheaper to check, since such writes, pending to the end, multiply the
// search.
func (p *part) reduced() []porcupine.Operation {
	return slices.DeleteFunc(slices.Clone(p.ops), func(o porcupine.Operation) bool { return o.Metadata.(opRef).unseen })
}

// unknownOutcome reports whether reply r leaves the outcome of c unknown:
// no reply came, or an error reply the model does not predict (the server
// refused or failed the command for a reason the model does not know, such
// as shutting down or a failed write), after which the command may or may
// not have taken effect.
//
// A MULTI's outcome is unknown too when a queued command got an error
// reply the model does not predict: the others may have taken effect
// without it.
func unknownOutcome(c command, r reply) bool {
	if c.kind == kindMulti && r.kind == replyArr && len(r.elems) == len(c.subs) {
		for j, sub := range c.subs {
			if r.elems[j].kind == replyErr && unknownOutcome(sub, r.elems[j]) {
				return true
			}
		}
		return false
	}
	return r.kind == replyNone || r.kind == replyErr && !(c.kind == kindIncr && (r.str == errNotInteger || r.str == errOverflow))
}

// model returns the part's model, whose keys start absent or, if
// unknownStart, unknown.
func (p *part) model(unknownStart bool) porcupine.Model {
	return newModel(describeCells(p.keys, p.prefix), len(p.keys), unknownStart)
}

// unionFind is a disjoint-set forest over 0..n-1.
type unionFind []int

func newUnionFind(n int) unionFind {
	uf := make(unionFind, n)
	for i := range uf {
		uf[i] = i
	}
	return uf
}

func (uf unionFind) find(i int) int {
	for uf[i] != i {
		uf[i] = uf[uf[i]]
		i = uf[i]
	}
	return i
}

func (uf unionFind) union(a, b int) { uf[uf.find(a)] = uf.find(b) }
