package clusterctl

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/flintkv/flint/internal/ask"
	"github.com/flintkv/flint/internal/backoff"
	"github.com/flintkv/flint/internal/shardmap"
)

// Create makes a new sharded cluster of processes started without a map,
// as `redis-cli --cluster create` does for Redis: g's addresses are every
// manager's (flint serve --manager, with no --servers), and groups[i] the
// client addresses of the members of data group i+1 (flint serve
// --shard-group i+1 --managers <g's addresses>), in member order.
//
// It first asks every process its part (INFO replication and cluster),
// and refuses, changing nothing, if one does not answer, is not the role
// it is named for (a manager, or a data node of that group), follows
// managers other than g's, or already holds a map: a manager that does
// says the cluster exists. It refuses managers that are not one cluster's
// (checkMetaGroup): several of which one keeps its map in memory, or that
// are not every member of one meta group. It then writes the map of epoch 1, each group
// with its members' own ids and the slots split evenly among the groups
// in order (shardmap.Even), through FLINT.MAPSET, which the meta group
// applies only while it holds no map (SET NX): of two creates at once, one
// wins and the other is refused. It returns the map once every manager
// and data node named serves it.
func (g *Group) Create(ctx context.Context, groups [][]string) (*shardmap.Map, error) {
	if err := distinct(g.cfg.Addrs, groups); err != nil {
		return nil, err
	}
	for _, addr := range g.cfg.Addrs {
		if _, err := g.part(ctx, addr, 0); err != nil {
			return nil, err
		}
	}
	if err := g.checkMetaGroup(ctx); err != nil {
		return nil, err
	}
	members := make([][]shardmap.Member, len(groups))
	for i, addrs := range groups {
		for _, addr := range addrs {
			id, err := g.part(ctx, addr, uint64(i+1))
			if err != nil {
				return nil, err
			}
			if j := slices.IndexFunc(members[i], func(m shardmap.Member) bool { return m.ID == id }); j >= 0 {
				return nil, fmt.Errorf("clusterctl: %s and %s are both member %d of group %d", members[i][j].Addr, addr, id, i+1)
			}
			members[i] = append(members[i], shardmap.Member{ID: id, Addr: addr})
		}
	}
	m, err := shardmap.Even(members)
	if err != nil {
		return nil, fmt.Errorf("clusterctl: %w", err)
	}
	if err := g.setFirstMap(ctx, m); err != nil {
		return nil, err
	}
	return m, g.awaitLearned(ctx, slices.Concat(append([][]string{g.cfg.Addrs}, groups...)...))
}

// distinct checks that no address is named twice, among the managers and
// the groups' members.
func distinct(managers []string, groups [][]string) error {
	seen := map[string]string{}
	name := func(what, addr string) error {
		if before, ok := seen[addr]; ok {
			return fmt.Errorf("clusterctl: %s is named twice: as %s and as %s", addr, before, what)
		}
		seen[addr] = what
		return nil
	}
	for _, addr := range managers {
		if err := name("a manager", addr); err != nil {
			return err
		}
	}
	if len(groups) == 0 {
		return errors.New("clusterctl: a cluster needs at least one data group")
	}
	for i, addrs := range groups {
		if len(addrs) == 0 {
			return fmt.Errorf("clusterctl: group %d has no member", i+1)
		}
		for _, addr := range addrs {
			if err := name(fmt.Sprintf("a member of group %d", i+1), addr); err != nil {
				return err
			}
		}
	}
	return nil
}

// part checks that the process at addr is a node of a sharded cluster of
// the data group group (0: a manager), holds no map, and, if a data node,
// follows only g's managers; it returns its member id.
func (g *Group) part(ctx context.Context, addr string, group uint64) (uint64, error) {
	v, err := ask.One(ctx, addr, g.cfg.Password, "INFO", "replication", "cluster")
	if err != nil {
		return 0, fmt.Errorf("clusterctl: no Flint process answers at %s: %w", addr, replyErr(err))
	}
	info := parseInfo(string(v.Str))
	role := "a data node of group " + strconv.FormatUint(group, 10)
	if group == 0 {
		role = "a manager"
	}
	got, sharded := info["flint_shard_group"]
	switch {
	case !sharded:
		return 0, fmt.Errorf("clusterctl: %s is not a node of a sharded cluster, but is named as %s (flint serve --manager, or --shard-group N --managers ...)", addr, role)
	case atoi(got) != group && atoi(got) == 0:
		return 0, fmt.Errorf("clusterctl: %s is a manager, but is named as %s", addr, role)
	case atoi(got) != group:
		return 0, fmt.Errorf("clusterctl: %s is a data node of group %s, but is named as %s", addr, got, role)
	case atoi(info["flint_shard_epoch"]) != 0 && group == 0:
		return 0, fmt.Errorf("clusterctl: the cluster has a map already (epoch %s, at manager %s): create makes a new cluster only (see flint cluster status)",
			info["flint_shard_epoch"], addr)
	case atoi(info["flint_shard_epoch"]) != 0:
		return 0, fmt.Errorf("clusterctl: %s belongs to a cluster already: it holds its map of epoch %s", addr, info["flint_shard_epoch"])
	}
	if group != 0 {
		for _, mg := range strings.Split(info["flint_shard_managers"], ",") {
			if !slices.Contains(g.cfg.Addrs, mg) {
				return 0, fmt.Errorf("clusterctl: %s follows the managers %s, not only those named (%s): it belongs to another cluster",
					addr, info["flint_shard_managers"], strings.Join(g.cfg.Addrs, ","))
			}
		}
	}
	return atoi(info["flint_member"]), nil
}

// setFirstMap sends FLINT.MAPSET m, of epoch 1, to the meta group's
// leader (mapSet) until it takes it or refuses it, trying again after a
// backoff while no manager can (the meta group has no leader yet). A
// refusal (0) after a try that may have been applied is not one if the
// map the managers hold is m.
func (g *Group) setFirstMap(ctx context.Context, m *shardmap.Map) error {
	pool := ask.NewPool(g.cfg.Password)
	defer pool.Close()
	enc := string(m.Encode())
	for wait := backoff.Default(); ; {
		v, addr, err := mapSet(ctx, pool, g.cfg.Addrs, enc)
		switch {
		case err == nil && v.Int == 1:
			return nil
		case err == nil:
			cur, _, _, err := ask.Map(ctx, addr, g.cfg.Password)
			if err == nil && string(cur.Encode()) == enc {
				return nil
			}
			return fmt.Errorf("clusterctl: the cluster got a map meanwhile (from another flint cluster create, or a manager started with --servers): this one was not written")
		case !errors.Is(err, errTryAgain) && ctx.Err() == nil:
			return fmt.Errorf("clusterctl: writing the cluster map: %w", replyErr(err))
		}
		if wait.Wait(ctx) != nil {
			return fmt.Errorf("clusterctl: writing the cluster map: %w (last: %v)", ctx.Err(), replyErr(err))
		}
	}
}

// awaitLearned waits until every process at addrs holds a map (INFO
// cluster's flint_shard_epoch is not 0).
func (g *Group) awaitLearned(ctx context.Context, addrs []string) error {
	for wait := backoff.Default(); len(addrs) > 0; {
		v, err := ask.One(ctx, addrs[0], g.cfg.Password, "INFO", "cluster")
		if err == nil && atoi(parseInfo(string(v.Str))["flint_shard_epoch"]) != 0 {
			addrs = addrs[1:]
			continue
		}
		if wait.Wait(ctx) != nil {
			return fmt.Errorf("clusterctl: the map was written, but %s has not learned it yet: %w", addrs[0], ctx.Err())
		}
	}
	return nil
}
