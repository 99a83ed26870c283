package resptest

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/flintkv/flint/internal/slot"
)

// Cluster is a fake sharded cluster: one Server per shard, each the only
// member (the master) of its shard's group, with a Store of its own. It
// answers as a sharded Flint or a Redis Cluster does, for the tests of
// clients that route by slot:
//
//   - CLUSTER SLOTS gives every shard's slot ranges, with the master's
//     address and a node id, as Redis 7 words it; CLUSTER INFO gives the
//     map's epoch (cluster_current_epoch), 1 at the start and one more
//     at each Move, as a sharded Flint does. A shard made to Lag answers
//     both from the map as it was then.
//   - A command with keys whose first key's slot another shard owns gets
//     MOVED to that shard; one whose keys are in several slots gets
//     CROSSSLOT.
//   - While a slot migrates (Migrate), its owner answers a command for a
//     key it does not hold with ASK to the importing shard, which runs the
//     next command after ASKING for it, and MOVED without it.
//   - RANGE is answered by each shard from its own keys, as each group of
//     a sharded Flint answers it: a client asks them all.
//   - FLINT.SESSION opens a session in the shard asked, with an id no
//     other shard gives; FLINT.SEQ in a session the shard did not open is
//     answered SESSIONEXPIRED, and a number it applied already with the
//     reply it kept.
//
// The shards' handlers share the cluster's lock, so commands are answered
// one at a time across the whole cluster.
type Cluster struct {
	Servers []*Server

	mu struct {
		sync.Mutex
		owner     [slot.Count]int // the shard that owns each slot
		epoch     uint64          // the map's: one more at each Move
		lagging   map[int]view    // shards that answer CLUSTER from an old map
		importing map[int]int     // slot -> the shard it migrates to
		stores    []Store
		sessions  []map[string]map[string]string // per shard: id -> number -> kept reply
		opened    int                            // sessions opened, in all shards
		counts    []map[string]int               // per shard: commands by name
		moved     int                            // MOVED replies sent
		asked     int                            // ASK replies sent
	}
}

// view is a map as CLUSTER SLOTS and INFO give it.
type view struct {
	owner [slot.Count]int
	epoch uint64
}

// StartCluster starts n shards with the slots split evenly among them, in
// order, as redis-cli --cluster create splits them. They stop when the
// test ends.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	c := &Cluster{}
	c.mu.importing, c.mu.lagging, c.mu.epoch = map[int]int{}, map[int]view{}, 1
	for i := range n {
		for s := i * slot.Count / n; s < (i+1)*slot.Count/n; s++ {
			c.mu.owner[s] = i
		}
		c.mu.stores = append(c.mu.stores, Store{})
		c.mu.sessions = append(c.mu.sessions, map[string]map[string]string{})
		c.mu.counts = append(c.mu.counts, map[string]int{})
	}
	for i := range n {
		c.Servers = append(c.Servers, StartConns(t, func() Handler {
			asking := false
			return func(args []string) string { return c.handle(i, &asking, args) }
		}))
	}
	return c
}

// Shard returns the shard that owns key's slot.
func (c *Cluster) Shard(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.owner[slot.Of([]byte(key))]
}

// Move makes shard to the owner of slots first..last, with their keys, as
// a finished slot move leaves them.
func (c *Cluster) Move(first, last, to int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.epoch++
	for s := first; s <= last; s++ {
		from := c.mu.owner[s]
		c.mu.owner[s] = to
		delete(c.mu.importing, s)
		for k, v := range c.mu.stores[from] {
			if slot.Of([]byte(k)) == s && from != to {
				c.mu.stores[to][k] = v
				delete(c.mu.stores[from], k)
			}
		}
	}
}

// Lag makes shard answer CLUSTER SLOTS and CLUSTER INFO from the map as
// it is now, from then on, as a member that stopped learning the map
// would; it goes on routing commands by the current map.
func (c *Cluster) Lag(shard int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.lagging[shard] = view{owner: c.mu.owner, epoch: c.mu.epoch}
}

// Migrate starts moving slot s to shard to: its owner keeps it, and sends
// commands for keys it does not hold there with ASK.
func (c *Cluster) Migrate(s, to int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.importing[s] = to
}

// Put sets key to val in shard's store, whichever shard owns it.
func (c *Cluster) Put(shard int, key, val string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.stores[shard][key] = val
}

// Count returns how many commands called name (upper case) shard got.
func (c *Cluster) Count(shard int, name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.counts[shard][name]
}

// Redirects returns how many MOVED and ASK replies the shards sent.
func (c *Cluster) Redirects() (moved, asked int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.moved, c.mu.asked
}

// handle answers one command at shard i; asking is its connection's
// ASKING flag.
func (c *Cluster) handle(i int, asking *bool, args []string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	name := strings.ToUpper(args[0])
	c.mu.counts[i][name]++
	asked := *asking
	*asking = false
	switch name {
	case "CLUSTER":
		v, lags := c.mu.lagging[i]
		if !lags {
			v = view{owner: c.mu.owner, epoch: c.mu.epoch}
		}
		switch {
		case len(args) == 2 && strings.EqualFold(args[1], "SLOTS"):
			return c.slotsOf(&v.owner)
		case len(args) == 2 && strings.EqualFold(args[1], "INFO"):
			return Bulk(fmt.Sprintf("cluster_state:ok\r\ncluster_current_epoch:%d\r\ncluster_my_epoch:%d\r\n", v.epoch, v.epoch))
		}
		return Err("ERR unknown subcommand")
	case "ASKING":
		*asking = true
		return OK
	case "FLINT.SESSION":
		c.mu.opened++
		id := int64((i+1)*1000 + c.mu.opened) // unique in the cluster
		c.mu.sessions[i][strconv.FormatInt(id, 10)] = map[string]string{}
		return Int(id)
	case "RANGE":
		return c.mu.stores[i].Handle(args)
	}
	if reply, ok := c.redirectLocked(i, asked, args); ok {
		return reply
	}
	if name == "FLINT.SEQ" && len(args) > 4 {
		kept, ok := c.mu.sessions[i][args[1]]
		if !ok {
			return Err("SESSIONEXPIRED the client session expired or is unknown; open a new one with FLINT.SESSION")
		}
		if r, ok := kept[args[2]]; ok {
			return r
		}
		r := c.mu.stores[i].Handle(args[4:])
		kept[args[2]] = r
		return r
	}
	return c.mu.stores[i].Handle(args)
}

// redirectLocked returns the MOVED, ASK or CROSSSLOT reply to a command with
// keys at shard i that it must not run, if it must not.
func (c *Cluster) redirectLocked(i int, asked bool, args []string) (string, bool) {
	keys := keysOf(args)
	if len(keys) == 0 {
		return "", false
	}
	s := slot.Of([]byte(keys[0]))
	for _, k := range keys[1:] {
		if slot.Of([]byte(k)) != s {
			return Err("CROSSSLOT Keys in request don't hash to the same slot"), true
		}
	}
	to, migrating := c.mu.importing[s]
	switch owner := c.mu.owner[s]; {
	case owner != i && migrating && to == i && asked:
		return "", false // importing, and asked for
	case owner != i:
		c.mu.moved++
		return Moved(s, c.Servers[owner].Addr), true
	case migrating:
		if _, held := c.mu.stores[i][keys[0]]; !held {
			c.mu.asked++
			return Err(fmt.Sprintf("ASK %d %s", s, c.Servers[to].Addr)), true
		}
	}
	return "", false
}

// keysOf returns the keys of a command: every argument of MGET, EXISTS and
// DEL, every other of MSET, none of the keyless ones, else the first;
// FLINT.SEQ's are those of the command it wraps.
func keysOf(args []string) []string {
	switch strings.ToUpper(args[0]) {
	case "FLINT.SEQ":
		if len(args) > 4 {
			return keysOf(args[4:])
		}
		return nil
	case "PING", "ECHO", "DBSIZE", "FLUSHDB", "FLUSHALL", "INFO":
		return nil
	case "MGET", "EXISTS", "DEL":
		return args[1:]
	case "MSET", "MSETNX":
		var keys []string
		for i := 1; i < len(args); i += 2 {
			keys = append(keys, args[i])
		}
		return keys
	}
	return args[1:min(2, len(args))]
}

// slotsOf is the CLUSTER SLOTS reply of the map owner: each run of slots
// one shard owns, with the shard's address and node id.
func (c *Cluster) slotsOf(owner *[slot.Count]int) string {
	var ranges []string
	for first := 0; first < slot.Count; {
		last, o := first, owner[first]
		for last+1 < slot.Count && owner[last+1] == o {
			last++
		}
		host, port, _ := net.SplitHostPort(c.Servers[o].Addr)
		p, _ := strconv.Atoi(port)
		node := Array(Bulk(host), Int(int64(p)), Bulk(fmt.Sprintf("%040x", o+1)))
		ranges = append(ranges, Array(Int(int64(first)), Int(int64(last)), node))
		first = last + 1
	}
	return Array(ranges...)
}
