package check

import (
	"slices"
	"strconv"
)

// lostWrite is an acknowledged write that the final read of its key does
// not show, although every other write of the key returned before it was
// called: it is the key's last write for certain, and nothing may change
// its effect.
type lostWrite struct {
	key   string
	write int  // index in history.Ops
	want  cell // what the key must hold after the write
	final int  // index of the final read
}

// findLostWrites checks each final read against the last write of its key,
// where that write is known for certain. Porcupine finds the same
// violations in its own way; this names them plainly.
func findLostWrites(h *history) []lostWrite {
	cmds := make([]command, len(h.Ops))
	writes := make(map[string][]int) // the workload's ops that may have changed each key
	for i, o := range h.Ops {
		c, err := parseCommand(o.Cmd)
		if err != nil || o.Final || c.kind.isRead() {
			continue
		}
		cmds[i] = c
		for _, k := range c.keys {
			if _, changed, known := effect(o.Reply, c, k); changed || !known {
				writes[k] = append(writes[k], i)
			}
		}
	}
	var lost []lostWrite
	for fi, f := range h.Ops {
		if !f.Final || f.Reply.kind == replyNone {
			continue
		}
		key := f.Cmd[1]
		w, want, ok := lastWrite(h, cmds, writes[key], key)
		if !ok {
			continue
		}
		if got, ok := observe(unknownKey, f.Reply); ok && !got.sameValue(want) {
			lost = append(lost, lostWrite{key: key, write: w, want: want, final: fi})
		}
	}
	return lost
}

// lastWrite returns which of writes (indexes of h.Ops, commands cmds) to
// key comes after every other for certain, and what the key holds after
// it. ok is false when none does, or its effect is unknown.
func lastWrite(h *history, cmds []command, writes []int, key string) (index int, after cell, ok bool) {
	if len(writes) == 0 {
		return -1, cell{}, false
	}
	index = writes[0]
	for _, i := range writes {
		if h.Ops[i].Call > h.Ops[index].Call {
			index = i
		}
	}
	w := h.Ops[index]
	for _, i := range writes {
		if o := h.Ops[i]; i != index && (unknownOutcome(cmds[i], o.Reply) || o.Return >= w.Call) {
			return -1, cell{}, false // it may take effect after w
		}
	}
	after, changed, known := effect(w.Reply, cmds[index], key)
	return index, after, known && changed
}

// effect returns what write c with reply r left in key, whether it changed
// the key, and whether the reply tells (known).
func effect(r reply, c command, key string) (after cell, changed, known bool) {
	if c.kind == kindExpire || c.kind == kindPersist { // they change deadlines only
		return cell{}, false, true
	}
	if unknownOutcome(c, r) {
		return cell{}, true, false
	}
	switch c.kind {
	case kindSet:
		set := r.equal(okReply)
		if c.get { // the old value decides NX and XX
			set = !(c.nx && r.kind == replyStr) && !(c.xx && r.kind == replyNil)
		}
		return value(c.vals[0]), set, true
	case kindSwap, kindPut:
		return value(c.vals[0]), true, true
	case kindCAS:
		return value(c.vals[1]), r.equal(intReply(1)), true
	case kindDel, kindDelete:
		return cell{}, true, true
	case kindIncr:
		return value(strconv.FormatInt(r.num, 10)), r.kind == replyInt, true
	case kindMSet:
		return value(c.vals[slices.Index(c.keys, key)]), true, true
	case kindMulti: // the last queued write of key decides
		if len(r.elems) != len(c.subs) {
			return cell{}, true, false // a reply the model rejects
		}
		for j := len(c.subs) - 1; j >= 0; j-- {
			if sub := c.subs[j]; sub.keys[0] == key && !sub.kind.isRead() {
				return effect(r.elems[j], sub, key)
			}
		}
	}
	return cell{}, false, true
}
