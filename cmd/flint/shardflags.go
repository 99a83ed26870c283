package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flintkv/flint/internal/node"
	"github.com/flintkv/flint/internal/shardmap"
)

// shardFlags are serve's flags for a node of a sharded cluster.
type shardFlags struct {
	group    uint64
	managers string
	manager  bool
	servers  string
	replicas int
	poll     time.Duration
}

func (f *shardFlags) register(fs *flag.FlagSet) {
	fs.Uint64Var(&f.group, "shard-group", 0, "make this node a member of data group N (from 1) of a sharded cluster, whose map it\nlearns from --managers")
	fs.StringVar(&f.managers, "managers", "", "the client addresses of the sharded cluster's managers: host:port,...")
	fs.BoolVar(&f.manager, "manager", false, "make this node a manager of a sharded cluster, holding its map (made from --servers, or\nwritten by flint cluster create): with --initial-members, one of a replicated meta group;\nwithout, alone and in memory")
	fs.StringVar(&f.servers, "servers", "", "for a manager: the client addresses of every data group's members, group by group:\ngroup g's member r (from 0) is the (g-1)*replicas+r-th, with id r+1 or, as id=host:port, its own;\nthe slots are split evenly among the groups (default: none, and no map until flint cluster\ncreate writes one)")
	fs.IntVar(&f.replicas, "replicas", 1, "for a manager: how many members each data group has")
	fs.DurationVar(&f.poll, "shard-poll", 250*time.Millisecond, "how often a data node asks the managers for the map, and a manager the groups for their leaders")
}

// config returns the node's part in a sharded cluster, from its flags, or
// nil if it has none. cluster is its replicated group's, if any.
func (f *shardFlags) config(cluster *node.ClusterConfig, password string) (*node.ShardConfig, error) {
	switch {
	case f.manager && f.group != 0:
		return nil, errors.New("--manager and --shard-group exclude each other: a manager holds the map and no slots")
	case !f.manager && f.group == 0:
		if f.managers != "" || f.servers != "" {
			return nil, errors.New("--managers needs --shard-group, and --servers needs --manager")
		}
		return nil, nil
	case f.poll <= 0:
		return nil, errors.New("--shard-poll must be positive")
	case f.group != 0:
		managers := splitList(f.managers)
		if len(managers) == 0 {
			return nil, errors.New("--shard-group needs --managers")
		}
		return &node.ShardConfig{Group: f.group, Managers: managers, Password: password, Poll: f.poll}, nil
	}
	if f.servers == "" {
		return &node.ShardConfig{Password: password, Poll: f.poll}, nil
	}
	m, err := evenMap(splitList(f.servers), f.replicas)
	if err != nil {
		return nil, err
	}
	return &node.ShardConfig{Map: m, Password: password, Poll: f.poll}, nil
}

// evenMap returns the map of the data groups whose members' client
// addresses are servers, replicas to a group, group by group, with the
// slots split evenly among them. Member r of a group has id r+1, or the id
// its entry names as id=host:port (a hosted group's members' ids are
// their nodes').
func evenMap(servers []string, replicas int) (*shardmap.Map, error) {
	addrs, err := groupsOf(servers, replicas)
	if err != nil {
		return nil, err
	}
	groups := make([][]shardmap.Member, len(addrs))
	for i, ga := range addrs {
		for r, addr := range ga {
			m := shardmap.Member{ID: uint64(r + 1), Addr: addr}
			if id, a, ok := strings.Cut(addr, "="); ok {
				n, err := strconv.ParseUint(id, 10, 64)
				if err != nil || n == 0 {
					return nil, fmt.Errorf("--servers: bad member id in %q", addr)
				}
				m = shardmap.Member{ID: n, Addr: a}
			}
			groups[i] = append(groups[i], m)
		}
	}
	m, err := shardmap.Even(groups)
	if err != nil {
		return nil, fmt.Errorf("--servers: %w", err)
	}
	return m, nil
}

// groupsOf splits servers, the client addresses of every data group's
// members, group by group, into the groups of replicas members each.
func groupsOf(servers []string, replicas int) ([][]string, error) {
	if replicas < 1 || len(servers) == 0 || len(servers)%replicas != 0 {
		return nil, fmt.Errorf("--servers must list --replicas (%d) addresses for each data group, got %d", replicas, len(servers))
	}
	var groups [][]string
	for i := 0; i < len(servers); i += replicas {
		groups = append(groups, servers[i:i+replicas])
	}
	return groups, nil
}

// splitList splits a comma-separated list, dropping empty elements.
func splitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}
