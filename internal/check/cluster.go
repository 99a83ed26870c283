package check

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
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
}

// member is one server of the cluster.
type member struct {
	id    uint64 // 0 for a single server
	srv   *server
	relay *relay    // in front of its peer address; nil for a single server
	down  time.Time // when a member killed by the nemesis is due to restart; zero when up
	peer  string    // the address the member listens on for peers, behind the relay
}

// Flags every member of a cluster gets: a fast clock, so that failovers
// fit in short runs (an election after 0.5 to 1 s without a leader).
var memberFlags = []string{"--raft-tick", "50ms", "--election-ticks", "10", "--huge-pages=false"}

// startCluster starts cfg's servers in dir and waits until each accepts
// connections.
func startCluster(cfg Config, bin, dir string) (*cluster, error) {
	c := &cluster{bin: bin, dir: dir, args: cfg.ServeArgs, env: cfg.ServerEnv}
	if cfg.Nodes == 0 {
		srv, err := spawnServer(bin, dir, cfg.ServeArgs, cfg.ServerEnv)
		if err != nil {
			return nil, err
		}
		c.members = []*member{{srv: srv}}
		return c, nil
	}
	secret := make([]byte, 16)
	rand.Read(secret)
	c.secret = hex.EncodeToString(secret)
	var list []string
	for i := range cfg.Nodes {
		m, err := c.newMember(uint64(i + 1))
		if err != nil {
			c.stop()
			return nil, err
		}
		c.members = append(c.members, m)
		list = append(list, fmt.Sprintf("%d=%s@%s", m.id, m.srv.addr, m.relay.addr()))
	}
	c.initial, c.nextID = strings.Join(list, ","), uint64(cfg.Nodes+1)
	for _, m := range c.members {
		m.srv.args = append(m.srv.args, "--initial-members", c.initial)
		if err := m.srv.start(); err != nil {
			c.stop()
			return nil, err
		}
	}
	return c, nil
}

// newMember makes member id's directory, addresses and relay, and its
// server with the flags every member has; the caller adds the group's.
func (c *cluster) newMember(id uint64) (*member, error) {
	dir := filepath.Join(c.dir, fmt.Sprintf("m%d", id))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrServer, err)
	}
	addrLn, err := holdAddr()
	if err != nil {
		return nil, err
	}
	peerLn, err := holdAddr()
	if err != nil {
		addrLn.Close()
		return nil, err
	}
	addr, peer := addrLn.Addr().String(), peerLn.Addr().String()
	rl, err := newRelay(id, peer)
	if err != nil {
		addrLn.Close()
		peerLn.Close()
		return nil, fmt.Errorf("%w: relay: %w", ErrServer, err)
	}
	args := append([]string{"--id", strconv.FormatUint(id, 10), "--peer-listen", peer}, memberFlags...)
	env := append([]string{"FLINT_CLUSTER_SECRET=" + c.secret}, c.env...)
	srv := newServer(c.bin, dir, addr, append(args, c.args...), env)
	srv.held = []net.Listener{addrLn, peerLn}
	return &member{id: id, srv: srv, relay: rl, peer: peer}, nil
}

// addrs returns the members' client addresses.
func (c *cluster) addrs() []string {
	var as []string
	for _, m := range c.members {
		as = append(as, m.srv.addr)
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
// members that answer, names itself leader in the highest term. It gives
// up with an error after timeout.
func (c *cluster) leader(timeout time.Duration) (*member, error) {
	deadline := time.Now().Add(timeout)
	for {
		var best *member
		var bestTerm uint64
		for _, m := range c.running() {
			self, lead, term, err := replicationInfo(m.srv.addr)
			if err == nil && self == lead && term >= bestTerm {
				best, bestTerm = m, term
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
	nc, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return 0, 0, 0, err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := nc.Write(appendCommand(nil, "INFO", "replication")); err != nil {
		return 0, 0, 0, err
	}
	v, err := protocol.NewReader(bufio.NewReader(nc), protocol.DefaultReaderLimits).Read()
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

// adminTimeout bounds a membership change, retries included.
const adminTimeout = 30 * time.Second

// admin sends a FLINT.MEMBER command to the group's leader, retrying while
// the group is busy with another change or has no leader.
func (c *cluster) admin(args ...any) error {
	cl, err := client.New(c.members[0].srv.addr, client.WithSeeds(c.addrs()...), client.WithDialTimeout(time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	for {
		_, err = cl.Do(ctx, append([]any{"FLINT.MEMBER"}, args...)...)
		var re *client.ReplyError
		if err == nil || errors.As(err, &re) && !strings.Contains(re.Msg, "in progress") || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("%w: FLINT.MEMBER %v: %w", ErrServer, args, err)
	}
	return nil
}

// join starts a new member, with the next id, and adds it to the group.
func (c *cluster) join() (*member, error) {
	m, err := c.newMember(c.nextID)
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
	if err := c.admin("ADD", m.id, self); err != nil {
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
	if err := c.admin("REMOVE", m.id); err != nil {
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

// replace removes old from the group, then adds a new member.
func (c *cluster) replace(old *member) (*member, error) {
	if err := c.remove(old); err != nil {
		return nil, err
	}
	return c.join()
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
// that are down are left down.
func (c *cluster) stop() error {
	var errs []error
	for _, m := range c.members {
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
