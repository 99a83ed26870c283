package check

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// kind is a command that the workload sends and the model knows.
type kind uint8

const (
	kindGet kind = iota
	kindSet
	kindSwap
	kindCAS
	kindDel
	kindIncr
	kindMSet
	kindMGet
	kindRange
	// MULTI is a transaction: MULTI, then GET k, SET k v, DEL k and INCR k
	// queued (each one key, SET without options), then EXEC, sent at once
	// on one connection. Its reply is EXEC's. It is one atomic operation
	// on its keys.
	kindMulti
	// EXPIRE k s gives k a deadline s seconds on (s at least minExpire, at
	// most maxTTL, so that none passes during a run), PERSIST k takes it
	// away, and TTL k tells whether k has one: their replies do not
	// depend on timing.
	kindExpire
	kindPersist
	kindTTL
	// PUT and DELETE are the line client's (package lineclient), as a
	// history recorded from its output holds them: each answers found or
	// not_found, whether the key had a value. PUT k v sets k to v (it is
	// SET k v GET underneath, but shows only whether the old value was
	// nil); DELETE k deletes k. The workload never draws them.
	kindPut
	kindDelete
	numKinds
)

// numMixKinds counts the kinds before it: those the workload draws, which
// --mix weighs.
const numMixKinds = kindPut

// kindNames are the commands' names, lower case, as --mix spells them.
var kindNames = [numKinds]string{"get", "set", "swap", "cas", "del", "incr", "mset", "mget", "range", "multi", "expire", "persist", "ttl", "put", "delete"}

func (k kind) String() string { return kindNames[k] }

// isRead reports whether commands of kind k never change the store.
func (k kind) isRead() bool {
	return k == kindGet || k == kindMGet || k == kindRange || k == kindTTL
}

// command is one recorded command, parsed.
type command struct {
	kind kind
	// keys are the keys named: one for GET, SET, SWAP, CAS, INCR, EXPIRE,
	// PERSIST, TTL, PUT and DELETE, one or more for DEL, MGET and MSET, and start and end for
	// RANGE.
	keys []string
	// vals are SET's, SWAP's and PUT's value, CAS's expected and new
	// values, and MSET's values, one per key.
	vals []string
	// nx, xx and get are SET's options.
	nx, xx, get bool
	// limit is RANGE's LIMIT; 0 means none.
	limit int
	// subs are MULTI's queued commands, in order; its keys are theirs,
	// each once, and it has no vals.
	subs []command
}

// parseCommand parses argv as the workload writes it: the command's name
// in upper case, then its arguments.
func parseCommand(argv []string) (command, error) {
	if len(argv) == 0 {
		return command{}, fmt.Errorf("%w: empty command", ErrHistory)
	}
	args := argv[1:]
	bad := func() (command, error) {
		return command{}, fmt.Errorf("%w: command %q is not one the model knows", ErrHistory, strings.Join(argv, " "))
	}
	c := command{kind: numKinds}
	for k, name := range kindNames {
		if strings.EqualFold(argv[0], name) {
			c.kind = kind(k)
		}
	}
	switch c.kind {
	case kindGet, kindIncr, kindPersist, kindTTL, kindDelete:
		if len(args) != 1 {
			return bad()
		}
		c.keys = args
	case kindSet:
		if len(args) < 2 || !c.setOptions(args[2:]) {
			return bad()
		}
		c.keys, c.vals = args[:1], args[1:2]
	case kindSwap, kindCAS, kindPut:
		if want := map[kind]int{kindSwap: 2, kindCAS: 3, kindPut: 2}[c.kind]; len(args) != want {
			return bad()
		}
		c.keys, c.vals = args[:1], args[1:]
	case kindDel, kindMGet:
		if len(args) == 0 {
			return bad()
		}
		c.keys = args
	case kindMSet:
		if len(args) == 0 || len(args)%2 != 0 {
			return bad()
		}
		for i := 0; i < len(args); i += 2 {
			c.keys, c.vals = append(c.keys, args[i]), append(c.vals, args[i+1])
		}
	case kindExpire:
		if len(args) != 2 {
			return bad()
		}
		if n, err := strconv.ParseInt(args[1], 10, 64); err != nil || n < minExpire || n > maxTTL {
			return bad()
		}
		c.keys = args[:1]
	case kindMulti:
		subs, ok := splitMulti(argv)
		if !ok {
			return bad()
		}
		for _, sub := range subs {
			sc, err := parseCommand(sub)
			if err != nil {
				return bad()
			}
			c.subs = append(c.subs, sc)
			if !slices.Contains(c.keys, sc.keys[0]) {
				c.keys = append(c.keys, sc.keys[0])
			}
		}
	case kindRange:
		switch {
		case len(args) == 2:
		case len(args) == 4 && strings.EqualFold(args[2], "LIMIT"):
			n, err := strconv.Atoi(args[3])
			if err != nil || n < 1 {
				return bad()
			}
			c.limit = n
		default:
			return bad()
		}
		c.keys = args[:2]
	default:
		return bad()
	}
	return c, nil
}

// multiArity is the number of arguments of each command MULTI may queue.
var multiArity = map[string]int{"GET": 1, "SET": 2, "DEL": 1, "INCR": 1}

// splitMulti splits a MULTI's argv, "MULTI", the queued commands one after
// the other, "EXEC", into the queued commands. ok is false unless it is
// one, with at least one queued command, each of multiArity.
func splitMulti(argv []string) (subs [][]string, ok bool) {
	if len(argv) < 3 || !strings.EqualFold(argv[0], "MULTI") || !strings.EqualFold(argv[len(argv)-1], "EXEC") {
		return nil, false
	}
	rest := argv[1 : len(argv)-1]
	for len(rest) > 0 {
		n, ok := multiArity[strings.ToUpper(rest[0])]
		if !ok || len(rest) < 1+n {
			return nil, false
		}
		subs, rest = append(subs, rest[:1+n]), rest[1+n:]
	}
	return subs, len(subs) > 0
}

// setOptions parses SET's options after the value and reports whether
// they are ones the model knows.
func (c *command) setOptions(opts []string) bool {
	for _, o := range opts {
		switch strings.ToUpper(o) {
		case "NX":
			c.nx = true
		case "XX":
			c.xx = true
		case "GET":
			c.get = true
		default:
			return false
		}
	}
	return !(c.nx && c.xx)
}

// written returns the values c writes: SET's, SWAP's and PUT's value,
// CAS's new value and MSET's values.
func (c command) written() []string {
	switch c.kind {
	case kindSet, kindSwap, kindMSet, kindPut:
		return c.vals
	case kindCAS:
		return c.vals[1:]
	case kindMulti:
		var vals []string
		for _, sub := range c.subs {
			vals = append(vals, sub.written()...)
		}
		return vals
	}
	return nil
}

// showsValues reports whether c's reply holds values that keys had: GET's,
// SWAP's, SET ... GET's, MGET's and RANGE's, and MULTI's that queues one
// of them. Other replies (OK, counts,
// found) tell no value, even when one is spelled like a value written.
func (c command) showsValues() bool {
	switch c.kind {
	case kindGet, kindSwap, kindMGet, kindRange:
		return true
	case kindMulti:
		return slices.ContainsFunc(c.subs, command.showsValues)
	case kindSet:
		return c.get
	}
	return false
}
