package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/replica"
	"github.com/flintkv/flint/internal/server"
	"github.com/flintkv/flint/internal/transport"
)

// ClusterConfig makes the node a member of a replicated group.
type ClusterConfig struct {
	ID      uint64   // this member's id, never reused
	Members []Member // the group's first members, the same list on each
	// Join, if set, is this member's addresses when it joins the group
	// as a new member (not one of Members): it waits to be added (FLINT.MEMBER
	// ADD at the leader), and learns the group from the leader's snapshot.
	Join *Member
	// PeerListen, if set, is where the member listens for peers, when that
	// differs from the peer address the group knows it by (its entry's
	// Peer): behind a proxy or a NAT.
	PeerListen string
	Secret     []byte // the cluster secret that peers prove they know
	// Name, if set, names the group in place of its first members' ids and
	// peer addresses (see clusterID): for members that may name each
	// other's addresses differently.
	Name string
	// ClusterID, if not 0, is the cluster's id itself, in place of one
	// made from Name or the first members: that of a node's data
	// directory (see Run), or one given to a node that joins.
	ClusterID uint64
	// Raft's clock (see replica.Options); zero values take its defaults.
	TickInterval  time.Duration
	ElectionTicks int
}

// Member is one member as the command line names it: its id, the address
// clients reach it at, and the address its peers do.
type Member struct {
	ID           uint64
	Client, Peer string
}

// ParseMembers parses a list of members in the form
// "id=host:port@peerport,..." (Redis's ip:port@cport) or
// "id=host:port@peerhost:peerport,...". Ids must be positive and unique.
func ParseMembers(s string) ([]Member, error) {
	var ms []Member
	for _, part := range strings.Split(s, ",") {
		m, err := parseMember(strings.TrimSpace(part))
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(ms, func(o Member) bool { return o.ID == m.ID }) {
			return nil, fmt.Errorf("member %d is named twice", m.ID)
		}
		ms = append(ms, m)
	}
	return ms, nil
}

func parseMember(s string) (Member, error) {
	id, addrs, ok := strings.Cut(s, "=")
	client, peer, ok2 := strings.Cut(addrs, "@")
	n, err := strconv.ParseUint(id, 10, 64)
	if !ok || !ok2 || err != nil || n == 0 || n >= 1<<31 {
		return Member{}, fmt.Errorf("bad member %q: want id=host:port@peerport, with an id from 1 to 2^31-1", s)
	}
	host, _, err := net.SplitHostPort(client)
	if err != nil {
		return Member{}, fmt.Errorf("bad client address in %q: %v", s, err)
	}
	if !strings.Contains(peer, ":") {
		peer = net.JoinHostPort(host, peer)
	}
	if _, _, err := net.SplitHostPort(peer); err != nil {
		return Member{}, fmt.Errorf("bad peer address in %q: %v", s, err)
	}
	return Member{ID: n, Client: client, Peer: peer}, nil
}

// info is what the group keeps of a member (replica.Options.Members):
// "client@peer".
func (m Member) info() []byte { return []byte(m.Client + "@" + m.Peer) }

// parseInfo reverses info.
func parseInfo(b []byte) (client, peer string) {
	client, peer, _ = strings.Cut(string(b), "@")
	return client, peer
}

// clusterID names the group: ClusterID if set, else a hash of its Name
// if it has one, else of its first members' ids and peer addresses, the
// same on each, so that a peer of another group is refused.
func (c *ClusterConfig) clusterID() uint64 {
	if c.ClusterID != 0 {
		return c.ClusterID
	}
	h := fnv.New64a()
	if c.Name != "" {
		io.WriteString(h, "name:"+c.Name)
		return h.Sum64() | 1
	}
	lines := make([]string, len(c.Members))
	for i, m := range c.Members {
		lines[i] = fmt.Sprintf("%d=%s", m.ID, m.Peer)
	}
	sort.Strings(lines)
	io.WriteString(h, strings.Join(lines, ","))
	return h.Sum64() | 1 // never 0, which names a single node
}

// self returns this member's entry of the first members.
func (c *ClusterConfig) self() (Member, error) {
	if c.Join != nil {
		return *c.Join, nil
	}
	i := slices.IndexFunc(c.Members, func(m Member) bool { return m.ID == c.ID })
	if i < 0 {
		return Member{}, fmt.Errorf("member %d is not among the members %v", c.ID, c.Members)
	}
	return c.Members[i], nil
}

// router is the transport's Handler for the node's one group: it hands
// what arrives to the replica once it is open, and drops it before.
type router struct {
	group uint64
	r     atomic.Pointer[replica.Replica]
}

func (h *router) Receive(from, group uint64, msgs []raftpb.Message) {
	if r := h.r.Load(); r != nil && group == h.group {
		r.Receive(from, group, msgs)
	}
}

func (h *router) ReceiveSnapshot(from, group uint64, m raftpb.Message, body io.Reader) error {
	if r := h.r.Load(); r != nil && group == h.group {
		return r.ReceiveSnapshot(from, group, m, body)
	}
	return errors.New("node: no such group here, or it is not open yet")
}

func (h *router) Unreachable(to, group uint64) {
	if r := h.r.Load(); r != nil && group == h.group {
		r.Unreachable(to, group)
	}
}

func (h *router) SnapshotDone(to, group uint64, err error) {
	if r := h.r.Load(); r != nil && group == h.group {
		r.SnapshotDone(to, group, err)
	}
}

// startTransport listens on this member's peer address and starts the
// transport, delivering to h.
func startTransport(c *ClusterConfig, h transport.Handler, log *slog.Logger) (*transport.Transport, error) {
	me, err := c.self()
	if err != nil {
		return nil, err
	}
	listen := me.Peer
	if c.PeerListen != "" {
		listen = c.PeerListen
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("listening for peers: %w", err)
	}
	t, err := transport.New(transport.Config{NodeID: c.ID, ClusterID: c.clusterID(), Secret: c.Secret,
		Listener: ln, Advertise: me.Peer, Handler: h, Logger: log})
	if err != nil {
		ln.Close()
		return nil, err
	}
	return t, nil
}

// followMembers keeps the transport's peers those of the group's
// configuration (each member's peer address), until ctx ends.
func followMembers(ctx context.Context, t *transport.Transport, rep *replica.Replica, self uint64) {
	known := map[uint64]string{}
	for {
		members := rep.Members()
		for id, info := range members {
			if _, peer := parseInfo(info); id != self && known[id] != peer {
				t.SetPeer(id, peer)
				known[id] = peer
			}
		}
		for id := range known {
			if _, ok := members[id]; !ok {
				t.RemovePeer(id)
				delete(known, id)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// AddMember adds member id, with its client@peer addresses, to the group
// (server.Membership): as a learner, caught up, then promoted. The group
// keeps the addresses as ParseMembers completes them: a peer port alone
// takes the client address's host.
func (m member) AddMember(ctx context.Context, id uint64, addrs string) error {
	ms, err := ParseMembers(fmt.Sprintf("%d=%s", id, addrs))
	if err != nil {
		return err
	}
	return m.Replica.AddMember(ctx, id, ms[0].info())
}

// RemoveMember removes member id from the group.
func (m member) RemoveMember(ctx context.Context, id uint64) error { return m.Remove(ctx, id) }

// member is the backend of a node that is a member of a replicated group:
// the replica, and what the server's Cluster interface asks of it.
type member struct {
	*replica.Replica
	self uint64
}

// Redirect returns the leader's client address if another member leads.
func (m member) Redirect() (string, bool) {
	lead := m.Leader()
	if lead == 0 || lead == m.self {
		return "", false
	}
	client, _ := parseInfo(m.MemberInfo(lead))
	return client, client != ""
}

// ClusterView returns the members, with raft's view of who votes.
func (m member) ClusterView() server.ClusterView {
	v := server.ClusterView{Self: m.self, Leader: m.Leader(), Dropped: m.DroppedMessages()}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	st, err := m.Status(ctx)
	if err == nil {
		v.Term, v.Commit, v.Applied = st.Term, st.Commit, st.Applied
	}
	for id, info := range m.Members() {
		client, _ := parseInfo(info)
		voter := err == nil && (hasVoter(st.Config.Voters[0], id) || hasVoter(st.Config.Voters[1], id))
		v.Members = append(v.Members, server.ClusterMember{ID: id, Addr: client, Voter: voter, Match: st.Progress[id].Match,
			Lost: m.LostMember(id)})
	}
	slices.SortFunc(v.Members, func(a, b server.ClusterMember) int { return cmp.Compare(a.ID, b.ID) })
	return v
}

func hasVoter(c map[uint64]struct{}, id uint64) bool {
	_, ok := c[id]
	return ok
}
