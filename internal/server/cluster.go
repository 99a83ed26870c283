package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/flintkv/flint/internal/protocol"
	"github.com/flintkv/flint/internal/replica"
	"github.com/flintkv/flint/internal/shardmap"
	"github.com/flintkv/flint/internal/slot"
)

// Cluster is implemented by a Backend that is one member of a replicated
// group. The server then speaks Redis Cluster's protocol in the shape of
// a cluster with one shard (as Redis-Raft and Dragonfly do): every slot,
// 0 to 16383, belongs to the group, its leader is the shard's master and
// the other members are its replicas. A command with keys sent to a member
// that does not lead is answered -MOVED <slot> <leader's address>, unless
// the connection sent READONLY and the command only reads: a follower then
// serves it, still linearizably (read index through the leader).
type Cluster interface {
	// Redirect returns the client address of the member that leads, if
	// one is known and it is not this member. It is called for every
	// command with keys, so it must be cheap.
	Redirect() (addr string, ok bool)
	// ClusterView returns what the member knows of its group.
	ClusterView() ClusterView
}

// ClusterView is what a member knows of its group at one moment.
type ClusterView struct {
	Self    uint64 // this member's id
	Leader  uint64 // the leader's id, or 0 if none is known
	Term    uint64 // raft's current term
	Commit  uint64 // the commit index this member knows
	Applied uint64 // the index of the last entry it applied
	Dropped int64  // peers' messages dropped for a full queue, since start
	Members []ClusterMember
}

// ClusterMember is one member of the group.
type ClusterMember struct {
	ID    uint64
	Addr  string // its client address, host:port
	Voter bool   // a voter, else a learner that is being caught up
	Match uint64 // on the leader: the last index known to be in its log
	Lost  bool   // it lost its data: the group refuses its votes, and it must be replaced
}

// member returns the member with id, if the view has it.
func (v ClusterView) member(id uint64) (ClusterMember, bool) {
	for _, m := range v.Members {
		if m.ID == id {
			return m, true
		}
	}
	return ClusterMember{}, false
}

// Sharded is implemented by a Cluster whose group is one of the groups of
// a sharded cluster (or by the meta group's members, which own no slots).
// The server then routes each command with keys by its slot: a key of
// another group's slot is answered -MOVED to that group's leader.
type Sharded interface {
	// Shards returns what the member knows of the cluster map; nil until
	// it learns it. It is called for every command with keys.
	Shards() *Shards
}

// Shards is a member's view of the cluster map at one moment: immutable.
type Shards struct {
	Map     *shardmap.Map               // nil until learned
	Group   uint64                      // this member's group; 0 for the meta group, which owns no slots
	Leaders map[uint64]uint64           // hints: each group's leader, as last learned, by member id
	Down    map[shardmap.MemberKey]bool // the members that did not answer the managers' last poll
	// Managers are the client addresses of the managers a data member
	// follows, as it was started with; nil at a manager.
	Managers []string
}

// firstSlot returns the first slot of the member's group, or 0 if it has
// none or the view is empty.
func (sh *Shards) firstSlot() int {
	if sh == nil || sh.Map == nil {
		return 0
	}
	if g := sh.Map.Group(sh.Group); g != nil && len(g.Slots) > 0 {
		return g.Slots[0].First
	}
	return 0
}

// leaderAddr returns the client address of group g's leader as the view
// believes it to be, or of its first member if it knows none.
func (sh *Shards) leaderAddr(g *shardmap.Group) string {
	if m, ok := g.Member(sh.Leaders[g.ID]); ok {
		return m.Addr
	}
	return g.Members[0].Addr
}

// redirect answers a command with keys at a member that does not serve
// it, as Redis Cluster does, and reports whether it did. In a sharded
// cluster a key of another group's slot gets MOVED to that group's leader,
// a command whose keys are in several slots CROSSSLOT, and any command
// while the map is unknown or the slot has no group CLUSTERDOWN. Within the
// member's group, a read on a READONLY connection is served here; a command
// at a follower gets MOVED to the leader; with no known leader, the command
// is left to the backend, which waits for one (and then fails with
// CLUSTERDOWN).
func (c *conn) redirect(cmd *command, args [][]byte) bool {
	if c.srv.cluster == nil || cmd.first == 0 || cmd.first >= len(args) {
		return false
	}
	s := slot.Of(args[cmd.first])
	if c.srv.sharded != nil {
		c.keySlot = s
		if cmd.perGroup {
			c.keySlot = -1
		}
		sh := c.srv.sharded.Shards()
		if c.routeShard(sh, cmd, args, s) {
			return true
		}
		if cmd.perGroup {
			s = sh.firstSlot() // a MOVED to the leader names a slot of the group
		}
	}
	if c.readonly && !cmd.write {
		return false
	}
	addr, ok := c.srv.cluster.Redirect()
	if !ok {
		return false
	}
	c.err(moved(s, addr))
	return true
}

// routeShard answers, as redirect does, a command with keys whose first is
// in slot s that this member's group does not serve, and reports whether
// it did.
func (c *conn) routeShard(sh *Shards, cmd *command, args [][]byte, s int) bool {
	if cmd.perGroup {
		return false
	}
	if cmd.name == "flint.seq" && len(args) > 5 { // route by the command it wraps
		if inner := commands[strings.ToLower(string(args[4]))]; inner != nil && inner.first > 0 {
			cmd, args = inner, args[4:]
		}
	}
	if sh == nil || sh.Map == nil {
		c.err("CLUSTERDOWN The cluster is down")
		return true
	}
	if len(sh.Map.Groups) > 1 && !oneSlot(cmd, args, s) {
		c.err("CROSSSLOT Keys in request don't hash to the same slot")
		return true
	}
	g := sh.Map.Owner(s)
	if msg, ok := c.moveRoute(sh, g, cmd.write, s); ok {
		if msg != "" {
			c.err(msg)
		}
		return msg != ""
	}
	switch {
	case g == nil:
		c.err("CLUSTERDOWN Hash slot not served")
	case g.ID != sh.Group:
		c.err(moved(s, sh.leaderAddr(g)))
	default:
		return false
	}
	return true
}

// oneSlot reports whether every key of the command is in slot s, the
// first's.
func oneSlot(cmd *command, args [][]byte, s int) bool {
	last := cmd.last
	if last < 0 {
		last += len(args)
	}
	for i := cmd.first + cmd.step; cmd.step > 0 && i <= last && i < len(args); i += cmd.step {
		if slot.Of(args[i]) != s {
			return false
		}
	}
	return true
}

// moved is Redis Cluster's redirection of a command on a key of slot s to
// the member at addr.
func moved(s int, addr string) string { return fmt.Sprintf("MOVED %d %s", s, addr) }

// noteSlot records, in a group, the slot s of a write added to the batch
// (of its first key; -1 for a write without keys), for refusedReply.
func (c *conn) noteSlot(s int32) {
	if c.srv.cluster != nil {
		c.slots = append(c.slots, s)
	}
}

// refusedReply is the reply to write i of the batch, which the backend
// refused with err (msg is errorReply's). A write can pass redirect and
// still reach a member that does not lead: one that led, or knew no
// leader, when the write came, or one removed from the group. A Redis
// Cluster node never answers it READONLY (redis-py's RedisCluster does
// not retry that) but MOVED to the leader, as redirect would have; or,
// with no leader known, CLUSTERDOWN, which cluster clients retry. A write
// without keys keeps READONLY, as a Redis replica answers it.
func (c *conn) refusedReply(err error, i int, msg string) string {
	if c.srv.cluster == nil || !errors.Is(err, replica.ErrNotLeader) || c.slots[i] < 0 {
		return msg
	}
	if addr, ok := c.srv.cluster.Redirect(); ok {
		return moved(int(c.slots[i]), addr)
	}
	return errorReply(replica.ErrNoLeader)
}

// clusterCmd runs CLUSTER's subcommands.
func (c *conn) clusterCmd(args [][]byte) {
	if !c.clusterOn() {
		return
	}
	sub := strings.ToLower(string(args[1]))
	switch sub {
	case "keyslot":
		if len(args) != 3 {
			c.errArity("cluster|keyslot")
			return
		}
		c.int(int64(slot.Of(args[2])))
		return
	case "countkeysinslot", "getkeysinslot":
		c.keysInSlot(sub, args)
		return
	case "help":
		c.help("CLUSTER",
			"COUNTKEYSINSLOT <slot>", "Return the number of keys in <slot>.",
			"GETKEYSINSLOT <slot> <count>", "Return key names stored by current node in a slot.",
			"INFO", "Return information about the cluster.",
			"KEYSLOT <key>", "Return the hash slot for <key>.",
			"MYID", "Return the node id.",
			"NODES", "Return cluster configuration seen by node.",
			"SHARDS", "Return information about slot range mappings and the nodes associated with them.",
			"SLOTS", "Return information about slots range mappings.")
		return
	}
	t := c.topology()
	switch sub {
	case "myid":
		c.bulkString(t.myID)
	case "slots":
		c.clusterSlots(t)
	case "shards":
		c.clusterShards(t)
	case "nodes":
		c.bulkString(t.nodes())
	case "info":
		c.bulkString(t.info())
	default:
		c.err(fmt.Sprintf("ERR unknown subcommand '%s'. Try CLUSTER HELP.", args[1]))
	}
}

// splitAddr splits host:port; a malformed address gives port 0.
func splitAddr(addr string) (string, int) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, 0
	}
	port, _ := strconv.Atoi(p)
	return host, port
}

// keysInSlot runs CLUSTER COUNTKEYSINSLOT <slot> and GETKEYSINSLOT <slot>
// <count>, as Redis words them, over the keys this member's group holds,
// read linearizably. Unlike Redis, which counts keys per slot as they are
// written, they scan every key of the group: they are for tools, not for
// a hot path.
func (c *conn) keysInSlot(sub string, args [][]byte) {
	want := 3
	if sub == "getkeysinslot" {
		want = 4
	}
	if len(args) != want {
		c.errArity("cluster|" + sub)
		return
	}
	count := int64(-1) // COUNTKEYSINSLOT
	sl, ok := intArg(args[2])
	if want == 4 {
		var okCount bool
		count, okCount = intArg(args[3])
		ok = ok && okCount
	}
	switch {
	case !ok:
		c.err("ERR value is not an integer or out of range")
		return
	case want == 4 && (count < 0 || sl < 0 || sl >= slot.Count):
		c.err("ERR Invalid slot or number of keys")
		return
	case sl < 0 || sl >= slot.Count:
		c.err("ERR Invalid slot")
		return
	}
	st, ok := c.read()
	if !ok {
		return
	}
	if count == 0 {
		c.out = protocol.AppendArray(c.out, 0)
		return
	}
	var keys []string
	n := int64(0)
	st.Snapshot().Ascend(func(key string, _ []byte) bool {
		if slot.Of([]byte(key)) != int(sl) {
			return true
		}
		n++
		if count >= 0 {
			keys = append(keys, key)
		}
		return count < 0 || n < count
	})
	if count < 0 {
		c.int(n)
		return
	}
	c.out = protocol.AppendArray(c.out, len(keys))
	for _, k := range keys {
		c.bulkString(k)
	}
}

// askingCmd is ASKING, which a client sends before the one command that
// an ASK redirection names. A group serves a slot moving to it once the
// slot is Open there, with or without it; before that, the command after
// ASKING is answered TRYAGAIN rather than MOVED back (see slotmove.go).
func (c *conn) askingCmd([][]byte) {
	if c.clusterOn() {
		c.asking = true
		c.ok()
	}
}

// readonly and readwrite set whether the connection's reads may be served
// by a follower (READONLY, READWRITE).
func (c *conn) readonlyCmd([][]byte)  { c.setReadonly(true) }
func (c *conn) readwriteCmd([][]byte) { c.setReadonly(false) }

func (c *conn) setReadonly(on bool) {
	if c.clusterOn() {
		c.readonly = on
		c.ok()
	}
}

// clusterOn reports whether the server is a member of a replicated group
// or a sharded cluster. If not, it refuses the command as Redis refuses
// the commands of cluster mode when cluster support is disabled.
func (c *conn) clusterOn() bool {
	if c.srv.cluster == nil {
		c.err("ERR This instance has cluster support disabled")
		return false
	}
	return true
}

// roleCmd replies to ROLE as Redis shapes it: on the leader, "master", its
// applied index (as the replication offset) and each other member's host,
// port and match index; on a follower, "slave", the leader's host and
// port, "connected" (or "connect" with no leader known) and its applied
// index. A single node is a master with no replicas.
func (c *conn) roleCmd([][]byte) {
	if c.srv.cluster == nil {
		c.out = protocol.AppendArray(c.out, 3)
		c.bulkString("master")
		c.int(0)
		c.out = protocol.AppendArray(c.out, 0)
		return
	}
	v := c.srv.cluster.ClusterView()
	if v.Leader == v.Self {
		c.out = protocol.AppendArray(c.out, 3)
		c.bulkString("master")
		c.int(int64(v.Applied))
		c.out = protocol.AppendArray(c.out, len(v.Members)-1)
		for _, m := range v.Members {
			if m.ID != v.Self {
				host, port := splitAddr(m.Addr)
				c.out = protocol.AppendArray(c.out, 3)
				c.bulkString(host)
				c.bulkString(strconv.Itoa(port))
				c.bulkString(strconv.FormatUint(m.Match, 10))
			}
		}
		return
	}
	lead, known := v.member(v.Leader)
	host, port := splitAddr(lead.Addr)
	state := "connected"
	if !known {
		state = "connect"
	}
	c.out = protocol.AppendArray(c.out, 5)
	c.bulkString("slave")
	c.bulkString(host)
	c.int(int64(port))
	c.bulkString(state)
	c.int(int64(v.Applied))
}

// mode returns the server's mode and this member's role as HELLO words
// them: "cluster" in a group (Redis's cluster mode, whose commands a group
// answers), with "master" for the leader and "replica" for the others.
func (c *conn) mode() (mode, role string) {
	if c.srv.cluster == nil {
		return "standalone", "master"
	}
	if v := c.srv.cluster.ClusterView(); v.Leader != v.Self {
		return "cluster", "replica"
	}
	return "cluster", "master"
}

// infoCluster is INFO's cluster section, which cluster clients read. A
// node of a sharded cluster adds what `flint cluster create` checks before
// it writes the first map: its group (0 at a manager), the managers a data
// member follows, and the epoch of the map it holds (0 while it has none).
func (c *conn) infoCluster(b *strings.Builder) {
	fmt.Fprintf(b, "cluster_enabled:%d\r\n", b2i(c.srv.cluster != nil))
	if c.srv.sharded == nil {
		return
	}
	var group, epoch uint64
	var managers []string
	if sh := c.srv.sharded.Shards(); sh != nil {
		group, managers = sh.Group, sh.Managers
		if sh.Map != nil {
			epoch = sh.Map.Epoch
		}
	}
	fmt.Fprintf(b, "flint_shard_group:%d\r\nflint_shard_managers:%s\r\nflint_shard_epoch:%d\r\n",
		group, strings.Join(managers, ","), epoch)
}

// infoReplication writes INFO's replication section: Redis's fields
// (role; on the master connected_slaves and one slaveN line per other
// member; on a replica the master's address and link), with the raft log
// as the replication stream: offsets are log indexes (the applied index),
// and the replication id changes with the term, as Redis's does on a
// failover. Then Flint's own: the member and leader ids, the raft term,
// commit and applied indexes, each member's match index and lag on the
// leader, whether it votes, and whether it lost its data.
func (c *conn) infoReplication(b *strings.Builder) {
	if c.srv.cluster == nil {
		fmt.Fprintf(b, "role:master\r\nconnected_slaves:0\r\n")
		c.infoReplID(b, 0, c.srv.appliedIndex())
		return
	}
	v := c.srv.cluster.ClusterView()
	if v.Leader == v.Self {
		fmt.Fprintf(b, "role:master\r\nconnected_slaves:%d\r\n", len(v.Members)-1)
		n := 0
		for _, m := range v.Members {
			if m.ID != v.Self {
				host, port := splitAddr(m.Addr)
				fmt.Fprintf(b, "slave%d:ip=%s,port=%d,state=online,offset=%d,lag=%d,member=%d,voter=%d,lost=%d\r\n",
					n, host, port, m.Match, v.Commit-min(v.Commit, m.Match), m.ID, b2i(m.Voter), b2i(m.Lost))
				n++
			}
		}
	} else {
		lead, known := v.member(v.Leader)
		host, port := splitAddr(lead.Addr)
		status := "up"
		if !known {
			status = "down"
		}
		fmt.Fprintf(b, "role:slave\r\nmaster_host:%s\r\nmaster_port:%d\r\nmaster_link_status:%s\r\n"+
			"master_sync_in_progress:0\r\nslave_read_repl_offset:%d\r\nslave_repl_offset:%d\r\nslave_priority:100\r\n"+
			"slave_read_only:1\r\nreplica_announced:1\r\nconnected_slaves:0\r\n",
			host, port, status, v.Commit, v.Applied)
	}
	c.infoReplID(b, v.Term, v.Applied)
	fmt.Fprintf(b, "flint_member:%d\r\nflint_leader:%d\r\nflint_term:%d\r\nflint_commit_index:%d\r\nflint_applied_index:%d\r\nflint_members:%d\r\nflint_peer_messages_dropped:%d\r\n",
		v.Self, v.Leader, v.Term, v.Commit, v.Applied, len(v.Members), v.Dropped)
}

// infoReplID writes Redis's replication id and offset fields: the id is
// the term, as 40 hex digits; the offset the applied index.
func (c *conn) infoReplID(b *strings.Builder, term, applied uint64) {
	fmt.Fprintf(b, "master_failover_state:no-failover\r\nmaster_replid:%040x\r\nmaster_replid2:%040x\r\n"+
		"master_repl_offset:%d\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:0\r\n", term, 0, applied)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Membership is implemented by a Backend whose group's members can be
// changed online, at its leader.
type Membership interface {
	// AddMember adds member id, reachable at addrs (client@peer), and
	// returns once it is a voter.
	AddMember(ctx context.Context, id uint64, addrs string) error
	RemoveMember(ctx context.Context, id uint64) error
	TransferLeadership(ctx context.Context, id uint64) error
}

// memberTimeout bounds one FLINT.MEMBER change.
const memberTimeout = time.Minute

// memberCmd is FLINT.MEMBER ADD id client@peer | REMOVE id | TRANSFER id,
// at the leader: add a member (as a learner, caught up, then promoted),
// remove one (it stops), or hand leadership to one.
func (c *conn) memberCmd(args [][]byte) {
	ms, ok := c.srv.kv.(Membership)
	if !ok {
		c.err("ERR this server is not a member of a replicated group")
		return
	}
	sub := strings.ToLower(string(args[1]))
	want := map[string]int{"add": 4, "remove": 3, "transfer": 3}[sub]
	if want == 0 {
		c.err(fmt.Sprintf("ERR unknown subcommand '%s': FLINT.MEMBER ADD id client@peer | REMOVE id | TRANSFER id", args[1]))
		return
	}
	if len(args) != want {
		c.errArity("flint.member|" + sub)
		return
	}
	id, err := strconv.ParseUint(string(args[2]), 10, 64)
	if err != nil || id == 0 {
		c.err("ERR the member id must be a positive integer")
		return
	}
	c.commit()
	ctx, cancel := context.WithTimeout(c.srv.ctx, memberTimeout)
	defer cancel()
	switch sub {
	case "add":
		err = ms.AddMember(ctx, id, string(args[3]))
	case "remove":
		err = ms.RemoveMember(ctx, id)
	default:
		err = ms.TransferLeadership(ctx, id)
	}
	if err != nil {
		c.writeErr(err)
		return
	}
	c.ok()
}
