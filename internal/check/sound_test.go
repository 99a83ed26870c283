package check

import (
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// TestSound generates linearizable histories, with writes of unknown
// outcome that took effect or not, from a sequential store written
// independently of the model, and checks that nothing the checker does
// rejects them: the whole check, and the narrowed and windowed
// sub-histories it searches and shrinks failures to. Any of those rejecting a
// linearizable history would be a false FAIL.
//
// FLINT_CHECK_SEED replays one seed; the test logs the first.
func TestSound(t *testing.T) {
	seed := rand.Uint64()
	if s := os.Getenv("FLINT_CHECK_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("seed %d (replay: FLINT_CHECK_SEED=%d)", seed, seed)
	const histories = 30
	for i := range uint64(histories) {
		rng := rand.New(rand.NewPCG(seed, i))
		conflict := i%2 == 0
		shards := []int{0, 0, 3}[i%3] // a sharded run's keys, with hash tags, every third
		h := linearizableHistory(rng, 3, 4, conflict, shards, 150)
		res, err := check(h, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if res.Verdict != Pass || len(res.lost) > 0 {
			t.Fatalf("history %d (seed %d): %s with %d lost writes; a linearizable history must pass", i, seed, res.Verdict, len(res.lost))
		}
		parts, _, _ := split(h)
		for _, p := range parts {
			assertSubHistoriesPass(t, rng, p)
			for k := range p.keys {
				if len(p.keys) > 1 {
					assertSubHistoriesPass(t, rng, p.narrowed(k))
				}
			}
		}
	}
}

// assertSubHistoriesPass checks p and random windows of p, also
// narrowed to each key.
func assertSubHistoriesPass(t *testing.T, rng *rand.Rand, p *part) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	if search(p.model(false), p.ops, deadline) != porcupine.Ok {
		t.Fatalf("%s fails", p.name)
	}
	for range 10 {
		lo := rng.IntN(len(p.ops))
		hi := lo + rng.IntN(len(p.ops)-lo)
		w := p.window(lo, hi)
		if p.illegal(w, deadline) {
			t.Fatalf("%s: window %d..%d of %d ops fails", p.name, lo, hi, len(p.ops))
		}
		for _, k := range p.touched(w.ops) {
			if n := (window{ops: p.narrow(w.ops, k), unknownStart: w.unknownStart}); p.illegal(n, deadline) {
				t.Fatalf("%s: window %d..%d narrowed to %s fails", p.name, lo, hi, p.keys[k])
			}
		}
	}
}

// linearizableHistory runs the workload's generators against refStore,
// taking each operation's effect at a random instant between its call and
// its return. One write in twenty has an unknown outcome, and takes effect
// or not. Some plain SETs and DELs of one key are the line client's PUT and
// DELETE instead. The history ends with a read of every key. With shards,
// its keys are those of a sharded run with that many data groups.
func linearizableHistory(rng *rand.Rand, clients, keys int, conflict bool, shards, n int) *history {
	mix, _ := ParseMix(DefaultMix)
	l := newLayout("", clients, keys, conflict, shards)
	h := &history{header: header{Version: historyVersion, Clients: clients, Keys: l.universe()}}
	gens := make([]*generator, clients)
	for c := range gens {
		gens[c] = newGenerator(rng.Uint64(), c, l.groups[c], mix)
	}
	st := refStore{vals: map[string]string{}, deadlines: map[string]bool{}}
	type pending struct {
		op
		applied bool
	}
	busy := make([]*pending, clients)
	var now int64
	for len(h.Ops) < n || slices.ContainsFunc(busy, func(p *pending) bool { return p != nil }) {
		now++
		c := rng.IntN(clients)
		p := busy[c]
		switch {
		case p == nil && len(h.Ops) < n: // call
			busy[c] = &pending{op: op{Client: c, Call: now, Cmd: lineForm(rng, gens[c].next())}}
		case p != nil && !p.applied: // take effect, or be lost
			p.applied = true
			if rng.IntN(20) == 0 && !kindNamed(p.Cmd[0]).isRead() {
				p.Unknown = "lost in the test"
				if rng.IntN(2) == 0 {
					st.do(p.Cmd)
				}
				continue
			}
			p.Reply = st.do(p.Cmd)
		case p != nil: // return
			p.Return = now
			h.Ops = append(h.Ops, p.op)
			gens[c].observe(p.Cmd, p.Reply)
			busy[c] = nil
		}
	}
	for _, k := range h.Keys {
		now++
		h.Ops = append(h.Ops, op{Client: clients, Call: now, Return: now, Cmd: []string{"GET", k}, Reply: st.do([]string{"GET", k}), Final: true})
	}
	slices.SortStableFunc(h.Ops, func(a, b op) int { return int(a.Call - b.Call) })
	return h
}

// lineForm returns cmd, or half the time, for a plain SET or a DEL of one
// key, the line client's PUT or DELETE of it.
func lineForm(rng *rand.Rand, cmd []string) []string {
	switch {
	case rng.IntN(2) == 0:
		return cmd
	case cmd[0] == "SET" && len(cmd) == 3:
		return []string{"PUT", cmd[1], cmd[2]}
	case cmd[0] == "DEL" && len(cmd) == 2:
		return []string{"DELETE", cmd[1]}
	}
	return cmd
}

// refStore is a sequential store of the workload's commands, written from
// Redis's documentation rather than from the model: values, and which keys
// have a deadline (none passes).
type refStore struct {
	vals      map[string]string
	deadlines map[string]bool
}

// set sets k to v, which clears its deadline.
func (s refStore) set(k, v string) {
	s.vals[k] = v
	delete(s.deadlines, k)
}

func (s refStore) del(k string) {
	delete(s.vals, k)
	delete(s.deadlines, k)
}

func (s refStore) do(cmd []string) reply {
	get := func(k string) reply {
		if v, ok := s.vals[k]; ok {
			return strReply(v)
		}
		return nilReply
	}
	switch cmd[0] {
	case "GET":
		return get(cmd[1])
	case "SET":
		old := get(cmd[1])
		_, exists := s.vals[cmd[1]]
		opts := cmd[3:]
		set := !(slices.Contains(opts, "NX") && exists) && !(slices.Contains(opts, "XX") && !exists)
		if set {
			s.set(cmd[1], cmd[2])
		}
		switch {
		case slices.Contains(opts, "GET"):
			return old
		case set:
			return okReply
		}
		return nilReply
	case "PUT", "DELETE":
		_, found := s.vals[cmd[1]]
		if cmd[0] == "PUT" {
			s.set(cmd[1], cmd[2])
		} else {
			s.del(cmd[1])
		}
		if found {
			return strReply("found")
		}
		return strReply("not_found")
	case "SWAP":
		old := get(cmd[1])
		s.set(cmd[1], cmd[2])
		return old
	case "CAS":
		if v, ok := s.vals[cmd[1]]; ok && v == cmd[2] {
			s.set(cmd[1], cmd[3])
			return intReply(1)
		}
		return intReply(0)
	case "DEL":
		n := 0
		for _, k := range cmd[1:] {
			if _, ok := s.vals[k]; ok {
				s.del(k)
				n++
			}
		}
		return intReply(int64(n))
	case "INCR":
		n, err := strconv.ParseInt(s.vals[cmd[1]], 10, 64)
		if _, ok := s.vals[cmd[1]]; !ok {
			n, err = 0, nil
		}
		if err != nil {
			return errReply(errNotInteger)
		}
		s.vals[cmd[1]] = strconv.FormatInt(n+1, 10) // INCR keeps a deadline
		return intReply(n + 1)
	case "MSET":
		for i := 1; i < len(cmd); i += 2 {
			s.set(cmd[i], cmd[i+1])
		}
		return okReply
	case "MGET":
		r := reply{kind: replyArr}
		for _, k := range cmd[1:] {
			r.elems = append(r.elems, get(k))
		}
		return r
	case "MULTI":
		subs, _ := splitMulti(cmd)
		r := reply{kind: replyArr}
		for _, sub := range subs {
			r.elems = append(r.elems, s.do(sub))
		}
		return r
	case "EXPIRE", "PERSIST":
		_, exists := s.vals[cmd[1]]
		had := s.deadlines[cmd[1]]
		s.deadlines[cmd[1]] = exists && cmd[0] == "EXPIRE"
		if exists && (cmd[0] == "EXPIRE" || had) {
			return intReply(1)
		}
		return intReply(0)
	case "TTL":
		switch _, exists := s.vals[cmd[1]]; {
		case !exists:
			return intReply(-2)
		case !s.deadlines[cmd[1]]:
			return intReply(-1)
		}
		return intReply(maxTTL - 1)
	case "RANGE":
		var keys []string
		for k := range s.vals {
			if cmd[1] <= k && k <= cmd[2] {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		if len(cmd) == 5 {
			limit, _ := strconv.Atoi(cmd[4])
			keys = keys[:min(limit, len(keys))]
		}
		r := reply{kind: replyArr, elems: []reply{}}
		for _, k := range keys {
			r.elems = append(r.elems, strReply(k), strReply(s.vals[k]))
		}
		return r
	}
	panic("refStore: unknown command " + cmd[0])
}
