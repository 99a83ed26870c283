package server

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// groupCommands start data groups on a node that hosts several.
var groupCommands = []*command{
	{name: "flint.group", arity: -4, flags: "admin", run: (*conn).groupCmd},
}

// GroupHost is implemented by the Backend of a member of a node that hosts
// members of several data groups, and can start more while it runs, so
// that FLINT.GROUP START, at any of its members' client ports, starts one.
type GroupHost interface {
	// StartGroup starts this node's member of group id, a new group whose
	// members are nodes by node id, each with its member's client address
	// (this node's among them), and returns once the member serves
	// clients; the node hosts it again after a restart. It changes
	// nothing if it fails.
	StartGroup(id uint64, members map[uint64]string) error
}

// groupCmd is FLINT.GROUP START group node=host:port [node=host:port ...]:
// start this node's member of a new group with those members (each node's
// id and its member's client address), as `flint cluster add-group
// --hosted` does on each of them. OK once it serves; an error if it was
// not started (see GroupHost).
func (c *conn) groupCmd(args [][]byte) {
	gh, ok := c.srv.kv.(GroupHost)
	switch {
	case !strings.EqualFold(string(args[1]), "start"):
		c.err(fmt.Sprintf("ERR unknown subcommand '%s': FLINT.GROUP START group node=host:port ...", args[1]))
		return
	case !ok:
		c.err("ERR this server is not a node that hosts groups: it starts none")
		return
	}
	id, err := strconv.ParseUint(string(args[2]), 10, 64)
	if err != nil || id == 0 {
		c.err("ERR the group id must be a positive integer")
		return
	}
	members, err := parseGroupMembers(args[3:])
	if err != nil {
		c.err("ERR " + err.Error())
		return
	}
	c.commit()
	if err := gh.StartGroup(id, members); err != nil {
		c.writeErr(err)
		return
	}
	c.ok()
}

// parseGroupMembers parses FLINT.GROUP START's node=host:port arguments.
func parseGroupMembers(args [][]byte) (map[uint64]string, error) {
	ms := map[uint64]string{}
	for _, a := range args {
		id, addr, ok := strings.Cut(string(a), "=")
		n, err := strconv.ParseUint(id, 10, 64)
		if !ok || err != nil || n == 0 {
			return nil, fmt.Errorf("bad member '%s': want node=host:port, node a positive integer", a)
		}
		if _, dup := ms[n]; dup {
			return nil, fmt.Errorf("node %d is named twice", n)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("bad client address in '%s': %v", a, err)
		}
		ms[n] = addr
	}
	return ms, nil
}
