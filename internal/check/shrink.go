package check

import (
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// A window is a sub-history of a part, built so that if the part is
// linearizable, so is the window. So a window that porcupine rejects is a
// proof, small enough to read, that the whole history is not linearizable.
//
// The window of ops lo..hi (in order of call) holds:
//   - those ops, as recorded;
//   - as writes of unknown outcome ("relaxed": any reply, and possibly no
//     effect), the other writes that may take effect among them: those
//     called before lo that returned after op lo was called, and those
//     called after hi before the last of lo..hi returned; reads among these
//     are left out;
//   - when lo > 0, unknown keys at the start, for whatever the ops before
//     left there.
//
// Why that is enough: take a linearization of the part. Every op left out
// before lo returned before op lo was called, so it comes before every op
// of lo..hi, and its effect is part of the unknown start. Every op left out
// after hi was called after every op of lo..hi that has a reply returned,
// so it comes after them all: only relaxed ops, whose replies do not
// matter, can follow it. Relaxed writes that the linearization puts before
// op lo move to the end, where they change nothing that is checked.
//
// Dropping a read from a window, or relaxing a write, keeps that property;
// dropping a relaxed write would not, so shrinking never does. So does
// narrowing a window to one key (see narrow).
type window struct {
	ops          []porcupine.Operation // in order of call
	unknownStart bool
	key          string // the one key the window was narrowed to, if any
}

// window returns the window of ops lo..hi of p.
func (p *part) window(lo, hi int) window {
	start, end := p.ops[lo].Call, p.ops[lo].Call
	for _, o := range p.ops[lo : hi+1] {
		if o.Return != p.inf {
			end = max(end, o.Return)
		}
	}
	w := window{unknownStart: lo > 0, key: p.only}
	for i, o := range p.ops {
		switch {
		case lo <= i && i <= hi:
			w.ops = append(w.ops, o)
		case i < lo && o.Return >= start, i > hi && o.Call <= end:
			if !o.Input.(*input).kind.isRead() {
				w.ops = append(w.ops, p.relax(o))
			}
		}
	}
	return w
}

// relax returns o with its reply ignored.
func (p *part) relax(o porcupine.Operation) porcupine.Operation {
	o.Output, o.Return = &reply{}, p.inf
	o.Metadata = opRef{index: o.Metadata.(opRef).index, relaxed: true}
	return o
}

// illegal reports whether porcupine shows, in a quick search before
// deadline, that w is not linearizable. Windows whose search is not quick
// count as passing: shrinking then settles for a larger window.
func (p *part) illegal(w window, deadline time.Time) bool {
	return search(p.model(w.unknownStart), w.ops, soon(deadline, quick(len(w.ops)))) == porcupine.Illegal
}

// shrink returns a small window of p that is not linearizable; p must not
// be. It finds the shortest history prefix that fails, then the latest
// start that still fails with it, then drops the reads and relaxes the
// writes that the failure does not need, and narrows the window to one key
// if that key alone fails. Out of time, it returns the smallest window
// found so far.
func (p *part) shrink(deadline time.Time) window {
	// Each search keeps its bound at a window known to fail.
	a, b := 0, len(p.ops)-1
	for a < b {
		mid := a + (b-a)/2
		if p.illegal(p.window(0, mid), deadline) {
			b = mid
		} else {
			a = mid + 1
		}
	}
	hi := b
	a, b = 0, hi
	for a < b {
		mid := a + (b-a+1)/2
		if p.illegal(p.window(mid, hi), deadline) {
			a = mid
		} else {
			b = mid - 1
		}
	}
	w := p.minimize(p.window(a, hi), deadline)
	if w.key != "" {
		return w
	}
	for _, k := range p.touched(w.ops) {
		n := window{ops: p.narrow(w.ops, k), unknownStart: w.unknownStart, key: p.keys[k]}
		if p.illegal(n, deadline) {
			return p.minimize(n, deadline)
		}
	}
	return w
}

// minimize drops from w, one at a time, each read whose removal leaves w
// failing, and relaxes each such write.
func (p *part) minimize(w window, deadline time.Time) window {
	for i := 0; i < len(w.ops); i++ {
		o := w.ops[i]
		if o.Metadata.(opRef).relaxed || o.Output.(*reply).kind == replyNone {
			continue
		}
		try := window{unknownStart: w.unknownStart, key: w.key}
		if o.Input.(*input).kind.isRead() {
			try.ops = slices.Delete(slices.Clone(w.ops), i, i+1)
		} else {
			try.ops = slices.Clone(w.ops)
			try.ops[i] = p.relax(o)
		}
		if p.illegal(try, deadline) {
			w = try
			if o.Input.(*input).kind.isRead() {
				i-- // the next op moved into place i
			}
		}
	}
	return w
}

// touched returns the cells that those of ops with replies touch, in
// order.
func (p *part) touched(ops []porcupine.Operation) []int {
	var cells []int
	for _, o := range ops {
		if o.Output.(*reply).kind != replyNone {
			cells = append(cells, o.Input.(*input).cells...)
		}
	}
	slices.Sort(cells)
	return slices.Compact(cells)
}

// narrowed returns p on cell k alone (see narrow).
func (p *part) narrowed(k int) *part {
	n := *p
	n.ops, n.only = p.narrow(p.ops, k), p.keys[k]
	return &n
}

// narrow returns ops on cell k alone: ops that do not touch k are left
// out, and those that touch other keys too keep only what they do to, or
// show of, k; DEL's count, which other keys make up too, is not checked.
// The state of k evolves in the narrowed ops as in ops, so if ops are
// linearizable, so are these.
func (p *part) narrow(ops []porcupine.Operation, k int) []porcupine.Operation {
	var out []porcupine.Operation
	for _, o := range ops {
		in := o.Input.(*input)
		j := slices.Index(in.cells, k)
		switch {
		case j < 0:
			continue
		case len(in.cells) == 1:
			out = append(out, o)
			continue
		}
		one := *in
		one.cells, one.text = []int{k}, in.text+" (only "+strings.TrimPrefix(p.keys[k], p.prefix)+" checked)"
		r := *o.Output.(*reply)
		switch in.kind {
		case kindMSet:
			one.keys, one.vals = in.keys[j:j+1], in.vals[j:j+1]
		case kindDel:
			one.keys, one.anyCount = in.keys[j:j+1], true
		case kindMGet:
			one.keys = in.keys[j : j+1]
			if r.kind == replyArr {
				r.elems = r.elems[j : j+1]
			}
		case kindRange:
			one.names, one.limit = in.names[j:j+1], 0
			one.limited = in.limited || in.limit > 0 && len(r.elems) == 2*in.limit
			r.elems = pairsOf(r.elems, in.names[j])
		case kindMulti: // its commands on k; a reply of another length fails still
			whole := o.Output.(*reply).elems
			one.keys, one.subs, r.elems = in.keys[j:j+1], nil, nil
			for i, sub := range in.subs {
				if sub.cells[0] == k {
					one.subs = append(one.subs, sub)
					if len(whole) == len(in.subs) {
						r.elems = append(r.elems, whole[i])
					}
				}
			}
		}
		o.Input, o.Output = &one, &r
		out = append(out, o)
	}
	return out
}

// pairsOf returns the pairs of RANGE's flat reply elems whose key is key.
func pairsOf(elems []reply, key string) []reply {
	var out []reply
	for i := 0; i+1 < len(elems); i += 2 {
		if elems[i].equal(strReply(key)) {
			out = append(out, elems[i], elems[i+1])
		}
	}
	return out
}
