package clusterctl

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/flintkv/flint/internal/ask"
	"github.com/flintkv/flint/internal/backoff"
)

// metaSettle bounds how long Create waits for the managers named to agree
// on one leader (a meta group just started is electing one) before it
// refuses them as not one group.
const metaSettle = 15 * time.Second

// errUnsettled marks a refusal of oneMetaGroup that may pass once the
// managers' group has a leader that every one of them knows.
var errUnsettled = errors.New("clusterctl: the managers do not agree on a leader")

// checkMetaGroup checks that g's addresses are the managers of one
// cluster, each once: every member of one meta group (oneMetaGroup; a
// manager that keeps its map in memory is a group of one), as their INFO
// replication says. While they do not agree on a leader it asks again,
// for up to metaSettle.
func (g *Group) checkMetaGroup(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(ctx, metaSettle)
	defer cancel()
	for wait := backoff.Default(); ; {
		infos := make([]map[string]string, len(g.cfg.Addrs))
		for i, addr := range g.cfg.Addrs {
			v, err := ask.One(ctx, addr, g.cfg.Password, "INFO", "replication")
			if err != nil {
				return fmt.Errorf("clusterctl: no Flint process answers at %s: %w", addr, replyErr(err))
			}
			infos[i] = parseInfo(string(v.Str))
		}
		err := oneMetaGroup(g.cfg.Addrs, infos)
		if !errors.Is(err, errUnsettled) || wait.Wait(sctx) != nil {
			return err
		}
	}
}

// oneMetaGroup checks, from the INFO replication of the managers at addrs
// (infos, in the same order), that they are the members of one meta
// group, all of them (a manager that keeps its map in memory is the one
// member of its group, as its INFO says): exactly
// one of them leads, every other one names it as leader, the leader's
// group has as many members as addrs, and the leader lists each other one
// (its address and member id) among them. An error wrapping errUnsettled
// says that they do not agree on a leader, which a group being elected
// may pass.
func oneMetaGroup(addrs []string, infos []map[string]string) error {
	for i, info := range infos {
		if info["role"] == "master" && info["flint_members"] == "1" && len(addrs) > 1 {
			return fmt.Errorf("clusterctl: the manager at %s is the one member of its meta group (it keeps its map in memory, or its group has one member): "+
				"it cannot be named with other managers (--addr names the managers of one cluster, every member of its meta group)", addrs[i])
		}
	}
	lead := -1
	for i, info := range infos {
		if info["role"] != "master" {
			continue
		}
		if lead >= 0 {
			return fmt.Errorf("%w: the managers at %s and %s both lead a meta group: they are not one group (or one has not learned it lost)",
				errUnsettled, addrs[lead], addrs[i])
		}
		lead = i
	}
	if lead < 0 {
		return unnamedLeader(addrs, infos)
	}
	leader := infos[lead]["flint_member"]
	for i, info := range infos {
		if i != lead && info["flint_leader"] != leader {
			return fmt.Errorf("%w: the manager at %s follows member %s, not member %s, which leads at %s: they are not one meta group",
				errUnsettled, addrs[i], info["flint_leader"], leader, addrs[lead])
		}
	}
	members := followersOf(infos[lead])
	if n := atoi(infos[lead]["flint_members"]); n != uint64(len(addrs)) {
		return fmt.Errorf("clusterctl: the meta group that %s leads has %d members (%s and %s), and %d managers are named: name every one of them",
			addrs[lead], n, addrs[lead], strings.Join(slices.Sorted(maps.Keys(members)), ", "), len(addrs))
	}
	for i, info := range infos {
		if id, ok := members[addrs[i]]; i != lead && (!ok || id != info["flint_member"]) {
			return fmt.Errorf("clusterctl: the manager at %s (member %s) is not a member of the meta group that %s leads, whose members are %s and %s",
				addrs[i], info["flint_member"], addrs[lead], addrs[lead], strings.Join(slices.Sorted(maps.Keys(members)), ", "))
		}
	}
	return nil
}

// unnamedLeader is the refusal of managers none of which leads: if they
// all follow one leader, it was not named; else they have not agreed on
// one yet (errUnsettled).
func unnamedLeader(addrs []string, infos []map[string]string) error {
	first := infos[0]
	for _, info := range infos {
		if info["flint_leader"] == "0" || info["flint_leader"] != first["flint_leader"] {
			return fmt.Errorf("%w: none of the managers named leads a meta group", errUnsettled)
		}
	}
	return fmt.Errorf("clusterctl: the managers named follow member %s, at %s, which is not named: name every one of the meta group's %s members",
		first["flint_leader"], net.JoinHostPort(first["master_host"], first["master_port"]), first["flint_members"])
}

// followersOf returns the other members that a leader's INFO replication
// lists (slaveN:ip=...,port=...,member=...): their member ids by client
// address.
func followersOf(info map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range info {
		if !strings.HasPrefix(k, "slave") {
			continue
		}
		fields := map[string]string{}
		for f := range strings.SplitSeq(v, ",") {
			name, val, _ := strings.Cut(f, "=")
			fields[name] = val
		}
		out[net.JoinHostPort(fields["ip"], fields["port"])] = fields["member"]
	}
	return out
}
