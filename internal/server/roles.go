package server

import (
	"strings"

	"github.com/flintkv/flint/internal/protocol"
)

// rolesCommands answer a manager's poll of a sharded cluster's members.
var rolesCommands = []*command{
	{name: "flint.roles", arity: -1, flags: "loading stale fast", run: (*conn).rolesCmd},
}

// Hosting is implemented by the Backend of a member whose process serves
// members of other groups too (a node that hosts several groups), so that
// FLINT.ROLES ALL answers for them all.
type Hosting interface {
	// Process names the process to FLINT.ROLES: RunID, but for tests
	// that run several "processes" in one.
	Process() string
	// Roles returns every member the process serves, this one included.
	Roles() []MemberRole
}

// RunID identifies this process, as Redis's run_id (INFO's).
func RunID() string { return runID }

// MemberRole is a member that a process serves, and whether it leads its
// group.
type MemberRole struct {
	Group, Member uint64
	Leads         bool
}

// rolesCmd is FLINT.ROLES [ALL], which a manager polls the members of the
// data groups with (node.pollLeaders): a flat array of a name of this
// process (its run_id, as INFO's) and, for this member, or with ALL for
// every member that the process serves, its group's id, its id, and
// "master" if it leads, else "slave". The name tells the manager which
// members share a process, so that it asks each process once.
func (c *conn) rolesCmd(args [][]byte) {
	all := len(args) == 2 && strings.EqualFold(string(args[1]), "all")
	if len(args) > 2 || len(args) == 2 && !all {
		c.err("ERR syntax error")
		return
	}
	process := runID
	h, hosting := c.srv.kv.(Hosting)
	if hosting {
		process = h.Process()
	}
	var roles []MemberRole
	if all && hosting {
		roles = h.Roles()
	} else {
		roles = []MemberRole{c.srv.ownRole()}
	}
	c.out = protocol.AppendArray(c.out, 1+3*len(roles))
	c.bulkString(process)
	for _, r := range roles {
		c.int(int64(r.Group))
		c.int(int64(r.Member))
		if r.Leads {
			c.bulkString("master")
		} else {
			c.bulkString("slave")
		}
	}
}

// ownRole returns this member's role, as ROLE says it: a server that is
// not in a replicated group leads, as member 1 of its group (0 if it is
// not in a sharded cluster).
func (s *Server) ownRole() MemberRole {
	r := MemberRole{Member: 1, Leads: true}
	if s.sharded != nil {
		if sh := s.sharded.Shards(); sh != nil {
			r.Group = sh.Group
		}
	}
	if s.cluster != nil {
		v := s.cluster.ClusterView()
		r.Member, r.Leads = v.Self, v.Leader == v.Self
	}
	return r
}
