package check

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// generator draws one client's commands. Each client has its own, seeded
// from the run's seed and the client's number, so a seed fixes every
// client's random draws; its commands also depend on the replies it got
// (CAS expects the last value the client saw), and so on the timing.
//
// Every value written is unique in the run ("c<client>-<n>"), so that every
// value read names the write that stored it.
type generator struct {
	rng    *rand.Rand
	client int
	groups []group
	mix    Mix
	total  int // sum of mix's weights
	writes int // values written so far, for unique values
	// seen is the value this client last saw in each key, so that CAS
	// names a value it may find.
	seen map[string]string
}

func newGenerator(seed uint64, client int, groups []group, mix Mix) *generator {
	g := &generator{
		rng:    rand.New(rand.NewPCG(seed, uint64(client))),
		client: client,
		groups: groups,
		mix:    mix,
		seen:   make(map[string]string),
	}
	for _, w := range mix {
		g.total += w
	}
	return g
}

// next returns the next command, as argv.
func (g *generator) next() []string {
	grp := g.groups[g.rng.IntN(len(g.groups))]
	key := grp.keys[g.rng.IntN(len(grp.keys))]
	switch k := g.pick(); k {
	case kindGet:
		if g.mix[kindIncr] > 0 && g.rng.IntN(5) == 0 {
			key = grp.counter
		}
		return []string{"GET", key}
	case kindSet:
		return g.set(key)
	case kindSwap:
		return []string{"SWAP", key, g.value()}
	case kindCAS:
		expected, ok := g.seen[key]
		if !ok || g.rng.IntN(5) == 0 {
			expected = fmt.Sprintf("c%d-never", g.client) // a CAS that must fail
		}
		return []string{"CAS", key, expected, g.value()}
	case kindDel:
		return append([]string{"DEL"}, g.someKeys(grp, 1+g.rng.IntN(3)/2)...)
	case kindIncr:
		return []string{"INCR", grp.counter}
	case kindMSet:
		cmd := []string{"MSET"}
		for _, k := range g.someKeys(grp, 2+g.rng.IntN(3)) {
			cmd = append(cmd, k, g.value())
		}
		return cmd
	case kindMGet:
		return append([]string{"MGET"}, g.someKeys(grp, 2+g.rng.IntN(3))...)
	case kindMulti:
		return g.multi(grp)
	case kindExpire, kindPersist, kindTTL:
		if g.mix[kindIncr] > 0 && g.rng.IntN(5) == 0 {
			key = grp.counter // INCR keeps a deadline
		}
		if k == kindExpire {
			return []string{"EXPIRE", key, strconv.Itoa(maxTTL)}
		}
		return []string{strings.ToUpper(k.String()), key}
	default:
		return g.rangeCmd(grp)
	}
}

// multi draws a transaction of two to four commands on keys of grp (so of
// one slot in a sharded run), at least one a write: GET, SET and DEL. It
// leaves the counter out: INCR in a transaction would tie the counter to
// the group's keys in one part, whose search its values then multiply.
func (g *generator) multi(grp group) []string {
	cmd := []string{"MULTI"}
	n := 2 + g.rng.IntN(3)
	wrote := false
	for i := range n {
		key := grp.keys[g.rng.IntN(len(grp.keys))]
		switch d := g.rng.IntN(10); {
		case d < 4 && (wrote || i < n-1):
			cmd = append(cmd, "GET", key)
		case d < 8:
			cmd, wrote = append(cmd, "SET", key, g.value()), true
		default:
			cmd, wrote = append(cmd, "DEL", key), true
		}
	}
	return append(cmd, "EXEC")
}

// pick draws a kind of command by the mix's weights.
func (g *generator) pick() kind {
	n := g.rng.IntN(g.total)
	for k, w := range g.mix {
		if n < w {
			return kind(k)
		}
		n -= w
	}
	panic("check: mix weights changed under the generator")
}

// value returns a value never written before in the run.
func (g *generator) value() string {
	g.writes++
	return fmt.Sprintf("c%d-%d", g.client, g.writes)
}

// set draws SET's options: mostly plain, as the fastest path in the server
// is for plain SETs, and sometimes NX, XX and GET.
func (g *generator) set(key string) []string {
	cmd := []string{"SET", key, g.value()}
	switch g.rng.IntN(10) {
	case 0:
		cmd = append(cmd, "NX")
	case 1:
		cmd = append(cmd, "XX")
	case 2:
		cmd = append(cmd, "GET")
	case 3:
		cmd = append(cmd, []string{"NX", "XX"}[g.rng.IntN(2)], "GET")
	}
	return cmd
}

// someKeys returns up to n distinct keys of grp, in random order.
func (g *generator) someKeys(grp group, n int) []string {
	perm := g.rng.Perm(len(grp.keys))[:min(n, len(grp.keys))]
	keys := make([]string, len(perm))
	for i, p := range perm {
		keys[i] = grp.keys[p]
	}
	return keys
}

// rangeCmd draws a RANGE inside grp: between two of its keys, or from just
// below or to just above them, sometimes with a LIMIT.
func (g *generator) rangeCmd(grp group) []string {
	a, b := g.rng.IntN(len(grp.keys)), g.rng.IntN(len(grp.keys))
	start, end := grp.keys[min(a, b)], grp.keys[max(a, b)]
	if g.rng.IntN(3) == 0 {
		start = grp.lo
	}
	if g.rng.IntN(3) == 0 {
		end = grp.hi
	}
	cmd := []string{"RANGE", start, end}
	if g.rng.IntN(3) == 0 {
		cmd = append(cmd, "LIMIT", strconv.Itoa(1+g.rng.IntN(3)))
	}
	return cmd
}

// observe notes the values that a reply to cmd shows this client.
func (g *generator) observe(cmd []string, r reply) {
	if r.kind == replyNone || r.kind == replyErr {
		return
	}
	switch kindNamed(cmd[0]) {
	case kindGet:
		g.note(cmd[1], r)
	case kindSet:
		if r.kind == replyStr && r.str == "OK" {
			g.seen[cmd[1]] = cmd[2]
		}
	case kindSwap:
		g.seen[cmd[1]] = cmd[2]
	case kindCAS:
		if r.kind == replyInt && r.num == 1 {
			g.seen[cmd[1]] = cmd[3]
		}
	case kindMSet:
		for i := 1; i+1 < len(cmd); i += 2 {
			g.seen[cmd[i]] = cmd[i+1]
		}
	case kindMGet:
		for i, e := range r.elems {
			g.note(cmd[1+i], e)
		}
	case kindMulti:
		subs, _ := splitMulti(cmd)
		if r.kind != replyArr || len(r.elems) != len(subs) {
			return
		}
		for i, sub := range subs {
			g.observe(sub, r.elems[i])
		}
	case kindRange:
		for i := 0; i+1 < len(r.elems); i += 2 {
			g.note(r.elems[i].str, r.elems[i+1])
		}
	}
}

func (g *generator) note(key string, r reply) {
	if r.kind == replyStr {
		g.seen[key] = r.str
	}
}
