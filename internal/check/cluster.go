package check

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flintkv/flint/client"
	"github.com/flintkv/flint/internal/protocol"
)

// cluster is the servers a checker that spawns runs the workload against:
// one `flint serve` (Config.Nodes 0), or the members of a replicated group
// of Config.Nodes, each a `flint serve` process whose peers reach it
// through a relay of the checker's (see relay), so that the nemesis can
// kill, pause, partition, remove, add and wipe members.
//
// One goroutine at a time drives it, as for server.
type cluster struct {
	bin     string
	dir     string   // member i's data and log are in dir/m<i>; a single server's in dir
	args    []string // more flags for every serve
	env     []string
	members []*member // the group's members now, in order of id
	gone    []*member // members removed, whose processes ended
	initial string    // the group's --initial-members
	secret  string
	nextID  uint64 // the id the next member to join gets
	// group is the cluster's id in a sharded cluster's map, or 0 if it
	// is not sharded. The map names the members it started with by their
	// client addresses, and never changes: so a member that joins later
	// takes over the client address of one that left (see replace).
	group uint64
	// hosted, for the nodes of a hosted run (see hosted.go), whose
	// members are the nodes, are the node ids of each data group's
	// members; nil for a group, whose members are one group. firsts are
	// each group's first members, as --host-groups lists them, and id
	// the nodes' cluster id once read (see hostchange.go).
	hosted [][]uint64
	firsts []string
	id     string
}

// member is one server of the cluster.
type member struct {
	id    uint64 // 0 for a single server
	srv   *server
	relay *relay    // in front of its peer address; nil for a single server
	down  time.Time // when a member killed by the nemesis is due to restart; zero when up
	peer  string    // the address the member listens on for peers, behind the relay
	// clients, for a hosted node, are its members' client addresses, by
	// group (srv.addr is one of them); nil for a member of one group,
	// whose is srv.addr.
	clients map[uint64]string
}

// addrs returns the client addresses m serves, in order of group.
func (m *member) addrs() []string {
	if m.clients == nil {
		return []string{m.srv.addr}
	}
	var as []string
	for _, g := range slices.Sorted(maps.Keys(m.clients)) {
		as = append(as, m.clients[g])
	}
	return as
}

// Flags every member of a cluster gets: a fast clock, so that failovers
// fit in short runs (an election after 0.5 to 1 s without a leader).
var memberFlags = []string{"--raft-tick", "50ms", "--election-ticks", "10", "--huge-pages=false"}

// startCluster starts cfg's servers, not sharded, in dir and waits until
// each accepts connections.
func startCluster(cfg Config, bin, dir string) (*cluster, error) {
	c, err := newGroup(cfg, bin, dir, 0, nil)
	if err != nil {
		return nil, err
	}
	if err := c.start(); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// newGroup makes cfg's servers in dir, each with the flags shard more
// (a data group's in a sharded cluster, whose id is group), and holds
// their addresses; start starts them.
func newGroup(cfg Config, bin, dir string, group uint64, shard []string) (*cluster, error) {
	c := &cluster{bin: bin, dir: dir, args: slices.Concat(shard, cfg.ServeArgs), env: cfg.ServerEnv, group: group}
	if cfg.Nodes == 0 {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrServer, err)
		}
		ln, err := holdAddr()
		if err != nil {
			return nil, err
		}
		srv := newServer(bin, dir, ln.Addr().String(), c.args, c.env)
		srv.held = []net.Listener{ln}
		c.members = []*member{{srv: srv}}
		return c, nil
	}
	if err := c.addMembers(cfg.Nodes); err != nil {
		return nil, err
	}
	c.makeGroup()
	return c, nil
}

// makeGroup makes c's members one replicated group, whose
// --initial-members are they all, and gives each the flags more.
func (c *cluster) makeGroup(more ...string) {
	var list []string
	for _, m := range c.members {
		list = append(list, fmt.Sprintf("%d=%s@%s", m.id, m.srv.addr, m.relay.addr()))
	}
	c.initial = strings.Join(list, ",")
	for _, m := range c.members {
		m.srv.args = append(m.srv.args, slices.Concat([]string{"--initial-members", c.initial}, more)...)
	}
}

// addMembers gives c a new secret and n members, with ids 1 to n (see
// newMember); the caller adds the flags that make them a group. On error
// it stops c.
func (c *cluster) addMembers(n int) error {
	secret := make([]byte, 16)
	rand.Read(secret)
	c.secret = hex.EncodeToString(secret)
	for i := range n {
		m, err := c.newMember(uint64(i+1), "")
		if err != nil {
			c.stop()
			return err
		}
		c.members = append(c.members, m)
	}
	c.nextID = uint64(n + 1)
	return nil
}

// start starts the members and waits until each accepts connections.
func (c *cluster) start() error {
	for _, m := range c.members {
		if err := m.srv.start(); err != nil {
			return err
		}
	}
	return nil
}

// newMember makes member id's directory, addresses and relay, and its
// server with the flags every member has; the caller adds the group's.
// Its client address is addr, that of a member gone from the group, or if
// addr is "", a free one.
func (c *cluster) newMember(id uint64, addr string) (*member, error) {
	dir := filepath.Join(c.dir, fmt.Sprintf("m%d", id))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrServer, err)
	}
	var held []net.Listener
	release := func() {
		for _, ln := range held {
			ln.Close()
		}
	}
	if addr == "" {
		addrLn, err := holdAddr()
		if err != nil {
			return nil, err
		}
		held, addr = append(held, addrLn), addrLn.Addr().String()
	}
	peerLn, err := holdAddr()
	if err != nil {
		release()
		return nil, err
	}
	held = append(held, peerLn)
	peer := peerLn.Addr().String()
	rl, err := newRelay(id, peer)
	if err != nil {
		release()
		return nil, fmt.Errorf("%w: relay: %w", ErrServer, err)
	}
	args := append([]string{"--id", strconv.FormatUint(id, 10), "--peer-listen", peer}, memberFlags...)
	env := append([]string{"FLINT_CLUSTER_SECRET=" + c.secret}, c.env...)
	srv := newServer(c.bin, dir, addr, append(args, c.args...), env)
	srv.held = held
	return &member{id: id, srv: srv, relay: rl, peer: peer}, nil
}

// addrs returns the members' client addresses.
func (c *cluster) addrs() []string {
	var as []string
	for _, m := range c.members {
		as = append(as, m.addrs()...)
	}
	return as
}

// replicated reports whether the cluster is a replicated group.
func (c *cluster) replicated() bool { return c.members[0].relay != nil }

// exited returns an error if a member exited without being killed.
func (c *cluster) exited() error {
	for _, m := range c.members {
		if m.down.IsZero() {
			if err := m.srv.exited(); err != nil {
				return fmt.Errorf("member %d: %w", m.id, err)
			}
		}
	}
	return nil
}

// running returns the members that are up.
func (c *cluster) running() []*member {
	var up []*member
	for _, m := range c.members {
		if m.down.IsZero() {
			up = append(up, m)
		}
	}
	return up
}

// restartDue restarts the killed members whose time has come; with all,
// every killed member.
func (c *cluster) restartDue(all bool) error {
	for _, m := range c.members {
		if !m.down.IsZero() && (all || time.Now().After(m.down)) {
			if err := m.srv.start(); err != nil {
				return fmt.Errorf("member %d: restart after kill -9: %w", m.id, err)
			}
			m.down = time.Time{}
		}
	}
	return nil
}

// quorumLost reports whether taking m down too would leave a group
// without a majority of its members up: the group of c's members, or, for
// hosted nodes, any group that m hosts a member of.
func (c *cluster) quorumLost(m *member) bool {
	groups := c.hosted
	if groups == nil {
		groups = [][]uint64{nil}
		for _, o := range c.members {
			groups[0] = append(groups[0], o.id)
		}
	}
	for _, ids := range groups {
		if !slices.Contains(ids, m.id) {
			continue
		}
		down := 0
		for _, o := range c.members {
			if slices.Contains(ids, o.id) && (o == m || !o.down.IsZero()) {
				down++
			}
		}
		if 2*down > len(ids) {
			return true
		}
	}
	return false
}

// partition cuts the directed links in cut (from, to) and no others.
func (c *cluster) partition(cut map[[2]uint64]bool) {
	for _, m := range c.members {
		from := map[uint64]bool{}
		for link := range cut {
			if link[1] == m.id {
				from[link[0]] = true
			}
		}
		m.relay.setCut(from)
	}
}

// leader returns the member that leads the group: the one that, of the
// members that answer, names itself leader in the highest term. Of hosted
// nodes, it returns the node that leads the most groups (of those, the
// one that leads in the highest term). It gives up with an error after
// timeout.
func (c *cluster) leader(timeout time.Duration) (*member, error) {
	return c.leading((*member).addrs, timeout)
}

// groupLeader returns the hosted node that leads group g, as leader does.
func (c *cluster) groupLeader(g uint64, timeout time.Duration) (*member, error) {
	return c.leading(func(m *member) []string {
		if addr, ok := m.clients[g]; ok {
			return []string{addr}
		}
		return nil
	}, timeout)
}

// leading returns the running member that leads the most groups at the
// client addresses addrs gives for it, as leader says.
func (c *cluster) leading(addrs func(*member) []string, timeout time.Duration) (*member, error) {
	deadline := time.Now().Add(timeout)
	for {
		var best *member
		var bestLeads int
		var bestTerm uint64
		for _, m := range c.running() {
			leads, top := 0, uint64(0)
			for _, addr := range addrs(m) {
				if self, lead, term, err := replicationInfo(addr); err == nil && self == lead {
					leads, top = leads+1, max(top, term)
				}
			}
			if leads > 0 && (leads > bestLeads || leads == bestLeads && top >= bestTerm) {
				best, bestLeads, bestTerm = m, leads, top
			}
		}
		if best != nil {
			return best, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w: no member leads after %v", ErrServer, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// replicationInfo asks the member at addr for its id, its leader's and
// its term (INFO replication), over a connection of its own: Flint's
// client would send INFO to the leader it knows of.
func replicationInfo(addr string) (self, lead, term uint64, err error) {
	v, err := askOne(addr, 300*time.Millisecond, "INFO", "replication")
	if err != nil || v.Kind != protocol.KindBulk {
		return 0, 0, 0, fmt.Errorf("INFO replication: %v %v", v, err)
	}
	fields := map[string]uint64{}
	for line := range strings.SplitSeq(string(v.Str), "\n") {
		k, val, _ := strings.Cut(strings.TrimSpace(line), ":")
		fields[k], _ = strconv.ParseUint(val, 10, 64)
	}
	return fields["flint_member"], fields["flint_leader"], fields["flint_term"], nil
}

// errNotSent wraps askOne's errors for a command that was not sent.
var errNotSent = errors.New("not sent")

// askOne sends args to the server at addr over a connection of its own
// and waits at most timeout for the reply; an error reply is returned as
// a *client.ReplyError. A failure to connect wraps errNotSent.
func askOne(addr string, timeout time.Duration, args ...string) (protocol.Value, error) {
	nc, err := net.DialTimeout("tcp", addr, min(timeout, 200*time.Millisecond))
	if err != nil {
		return protocol.Value{}, fmt.Errorf("%w: %w", errNotSent, err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(timeout))
	if _, err := nc.Write(appendCommand(nil, args...)); err != nil {
		return protocol.Value{}, err
	}
	v, err := protocol.NewReader(bufio.NewReader(nc), protocol.DefaultReaderLimits).Read()
	if err == nil && v.IsError() {
		err = &client.ReplyError{Msg: string(v.Str)}
	}
	return v, err
}

// adminTimeout bounds a membership change, retries included.
const adminTimeout = 30 * time.Second

// admin sends FLINT.MEMBER args to the group's leader, over a connection
// of its own, retrying while the group is busy with another change, has no
// leader, or the member asked no longer leads. (Flint's client would send
// it, a command without keys, to the leader of slot 0, in a sharded
// cluster another group's.)
//
// A change whose outcome is unknown (its leader lost leadership) is sent
// again: an ADD resumes a learner added with the same addresses, and is
// refused for an id that is a member already, which the lost attempt then
// made a voter; a REMOVE is refused for an id no longer a member, which
// the lost attempt then removed. Either refusal, after an unknown
// outcome, is the change done.
func (c *cluster) admin(args ...string) error {
	deadline := time.Now().Add(adminTimeout)
	unknown := false
	for {
		lead, err := c.leader(time.Until(deadline))
		if err == nil {
			_, err = askOne(lead.srv.addr, time.Until(deadline), append([]string{"FLINT.MEMBER"}, args...)...)
		}
		var re *client.ReplyError
		isReply := errors.As(err, &re)
		done := unknown && isReply && (args[0] == "ADD" && strings.Contains(re.Msg, "is, or was, a member's") ||
			args[0] == "REMOVE" && strings.Contains(re.Msg, "no current member"))
		unknown = unknown || isReply && re.Code() == "UNKNOWN"
		retry := errors.Is(err, errNotSent) || isReply && (re.Code() == "READONLY" || re.Code() == "CLUSTERDOWN" ||
			re.Code() == "UNKNOWN" || strings.Contains(re.Msg, "in progress"))
		switch {
		case err == nil || done:
			return nil
		case !retry || time.Now().After(deadline):
			return fmt.Errorf("%w: FLINT.MEMBER %v: %w", ErrServer, args, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// join starts a new member, with the next id and client address addr (a
// free one if ""), and adds it to the group.
func (c *cluster) join(addr string) (*member, error) {
	m, err := c.newMember(c.nextID, addr)
	if err != nil {
		return nil, err
	}
	c.nextID++
	self := m.srv.addr + "@" + m.relay.addr()
	m.srv.args = append(m.srv.args, "--initial-members", c.initial, "--join", self)
	if err := m.srv.start(); err != nil {
		m.relay.close()
		return nil, err
	}
	if err := c.admin("ADD", strconv.FormatUint(m.id, 10), self); err != nil {
		m.srv.kill()
		m.relay.close()
		return nil, err
	}
	c.members = append(c.members, m)
	return m, nil
}

// removeTimeout is how long a removed member has to notice and exit
// before it is killed.
const removeTimeout = 10 * time.Second

// remove removes m from the group and ends its process: a removed member
// exits by itself once it learns of its removal, and is killed if it has
// not by removeTimeout (it may have been cut off when the change
// committed). A member that is down is removed as it is.
func (c *cluster) remove(m *member) error {
	if err := c.admin("REMOVE", strconv.FormatUint(m.id, 10)); err != nil {
		return err
	}
	if m.down.IsZero() {
		select {
		case <-m.srv.proc.exited:
		case <-time.After(removeTimeout):
			m.srv.kill()
		}
	}
	m.relay.close()
	c.members = deleteMember(c.members, m)
	c.gone = append(c.gone, m)
	return nil
}

// replace removes old from the group, then adds a new member. In a
// sharded cluster the new member listens on old's client address, the one
// the cluster map names: the map has no membership changes yet, and the
// managers find a group's leader by asking the addresses it names (as a
// replaced machine keeps its host name).
func (c *cluster) replace(old *member) (*member, error) {
	if err := c.remove(old); err != nil {
		return nil, err
	}
	addr := ""
	if c.group != 0 {
		addr = old.srv.addr
	}
	return c.join(addr)
}

func deleteMember(ms []*member, m *member) []*member {
	out := ms[:0]
	for _, o := range ms {
		if o != m {
			out = append(out, o)
		}
	}
	return out
}

// stop stops every member (SIGTERM, see server.stop) and relay. Members
// that are down are left down, and those never started let go of their
// addresses.
func (c *cluster) stop() error {
	var errs []error
	for _, m := range c.members {
		for _, ln := range m.srv.held {
			ln.Close()
		}
		if m.srv.proc != nil && m.down.IsZero() {
			if err := m.srv.stop(); err != nil {
				errs = append(errs, fmt.Errorf("member %d: %w", m.id, err))
			}
		}
		if m.relay != nil {
			m.relay.close()
		}
	}
	return errors.Join(errs...)
}

// describe names the cluster for the summary.
func (c *cluster) describe() string {
	if !c.replicated() {
		return "spawned server " + c.members[0].srv.addr
	}
	return fmt.Sprintf("spawned group of %d members %s", len(c.members), strings.Join(c.addrs(), " "))
}
