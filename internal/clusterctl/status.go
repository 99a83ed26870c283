package clusterctl

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/flintkv/flint/internal/ask"
)

// Status is a group's state as its members report it.
type Status struct {
	Leader  uint64 // the leader's member id, or 0 if no member knows one
	Term    uint64 // the leader's term (with no leader, the highest a member reports)
	Commit  uint64 // the leader's commit index (with no leader, the highest a member reports)
	Members []Member
}

// Member is one member's state: what the leader knows of it, and what it
// says of itself.
type Member struct {
	ID    uint64
	Addr  string // its client address
	Voter bool   // a voter, else a learner being caught up; known only from a leader
	Lost  bool   // it lost its data (the group refuses its votes): replace it; known only from a leader
	// Match is the last index the leader knows to be in its log, and Lag
	// how far that is behind the leader's commit index (for the leader
	// itself: its commit index, and 0).
	Match, Lag uint64
	// What the member says of itself, if it answered (Err is nil): its
	// role (leader, follower, or learner), term, commit and applied indexes.
	Err                   error
	Role                  string
	Term, Commit, Applied uint64
}

// Status asks the group for its state: the leader for its members, their
// roles and match indexes, and each member for its own indexes. Members
// that do not answer are listed with the reason. With no leader, whether
// each member votes, and its match index, are unknown.
func (g *Group) Status(ctx context.Context) (Status, error) {
	addr, info, err := g.leaderOrAny(ctx)
	if err != nil {
		return Status{}, err
	}
	nodes, err := ask.One(ctx, addr, g.cfg.Password, "CLUSTER", "NODES")
	if err != nil {
		return Status{}, replyErr(err)
	}
	st := fromNodes(string(nodes.Str))
	if info["role"] == "master" {
		st.fromLeader(info)
	}
	g.askEach(ctx, &st)
	return st, nil
}

// leaderOrAny returns the address and INFO replication of the member
// that leads, as the first of Config.Addrs that answers says (itself, or
// the master it names, if that one says it leads), or else of that first
// member.
func (g *Group) leaderOrAny(ctx context.Context) (string, map[string]string, error) {
	addr, info, err := g.anyMember(ctx)
	if err != nil {
		return "", nil, err
	}
	if info["role"] == "slave" && info["master_link_status"] == "up" {
		lead := net.JoinHostPort(info["master_host"], info["master_port"])
		if li, err := askInfo(ctx, lead, g.cfg.Password); err == nil && li["role"] == "master" {
			return lead, li, nil
		}
	}
	return addr, info, nil
}

// anyMember returns the address and INFO replication of the first member
// of Config.Addrs that answers.
func (g *Group) anyMember(ctx context.Context) (string, map[string]string, error) {
	var err error
	for _, addr := range g.cfg.Addrs {
		var info map[string]string
		if info, err = askInfo(ctx, addr, g.cfg.Password); err == nil {
			if _, ok := info["flint_member"]; !ok {
				return "", nil, ErrNotReplicated
			}
			return addr, info, nil
		}
	}
	return "", nil, fmt.Errorf("clusterctl: no member answers at %s: %w", strings.Join(g.cfg.Addrs, ","), replyErr(err))
}

// fromNodes is the group's members as CLUSTER NODES lists them: ids and
// client addresses. In a sharded cluster, CLUSTER NODES lists every
// group's members, and only those of the answering member's group (the
// "myself" line's) are the group's: a node id is 24 hex digits of group id
// and 16 of member id.
func fromNodes(nodes string) Status {
	var st Status
	lines := strings.Split(strings.TrimSpace(nodes), "\n")
	group := ""
	for _, line := range lines {
		if f := strings.Fields(line); len(f) > 2 && len(f[0]) == 40 && strings.Contains(f[2], "myself") {
			group = f[0][:24]
		}
	}
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) < 2 || len(f[0]) != 40 || f[0][:24] != group {
			continue
		}
		id, err := strconv.ParseUint(f[0][24:], 16, 64)
		addr, _, _ := strings.Cut(f[1], "@")
		if err == nil {
			st.Members = append(st.Members, Member{ID: id, Addr: addr})
		}
	}
	return st
}

// fromLeader adds what the leader's INFO replication says: its id, term
// and commit index, and a slaveN line for each other member (offset: its
// match index, lag, member, voter).
func (st *Status) fromLeader(info map[string]string) {
	st.Leader, st.Term, st.Commit = atoi(info["flint_member"]), atoi(info["flint_term"]), atoi(info["flint_commit_index"])
	seen := followers(info)
	for i := range st.Members {
		m := &st.Members[i]
		if m.ID == st.Leader {
			m.Voter, m.Match = true, st.Commit
		} else if f, ok := seen[m.ID]; ok {
			m.Voter, m.Match, m.Lag, m.Lost = f["voter"] == "1", atoi(f["offset"]), atoi(f["lag"]), f["lost"] == "1"
		}
	}
}

// followers returns the fields of each slaveN line of a leader's INFO
// replication, by member id.
func followers(info map[string]string) map[uint64]map[string]string {
	seen := map[uint64]map[string]string{}
	for i := 0; ; i++ {
		line, ok := info[fmt.Sprint("slave", i)]
		if !ok {
			return seen
		}
		f := map[string]string{}
		for _, kv := range strings.Split(line, ",") {
			k, v, _ := strings.Cut(kv, "=")
			f[k] = v
		}
		seen[atoi(f["member"])] = f
	}
}

// askEach asks every member for its own INFO replication, all at once.
func (g *Group) askEach(ctx context.Context, st *Status) {
	var wg sync.WaitGroup
	for i := range st.Members {
		wg.Add(1)
		go func(m *Member) {
			defer wg.Done()
			info, err := askInfo(ctx, m.Addr, g.cfg.Password)
			if err != nil {
				m.Err = err
				return
			}
			m.Term, m.Commit, m.Applied = atoi(info["flint_term"]), atoi(info["flint_commit_index"]), atoi(info["flint_applied_index"])
			m.Role = "follower"
			switch {
			case info["role"] == "master":
				m.Role = "leader"
			case st.Leader != 0 && !m.Voter:
				m.Role = "learner"
			}
		}(&st.Members[i])
	}
	wg.Wait()
	for _, m := range st.Members {
		if st.Leader == 0 && m.Err == nil {
			st.Term, st.Commit = max(st.Term, m.Term), max(st.Commit, m.Commit)
		}
	}
}

// Write prints st as a table, with a line about the group above it.
func (st Status) Write(w io.Writer) error {
	voters := 0
	for _, m := range st.Members {
		if m.Voter {
			voters++
		}
	}
	if st.Leader != 0 {
		fmt.Fprintf(w, "%d members, %d voters; member %d leads in term %d; commit index %d\n\n",
			len(st.Members), voters, st.Leader, st.Term, st.Commit)
	} else {
		fmt.Fprintf(w, "%d members; no leader: an election is running, or no majority of the voters is up\n\n", len(st.Members))
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tADDRESS\tROLE\tVOTER\tMATCH\tLAG\tTERM\tCOMMIT\tAPPLIED")
	for _, m := range st.Members {
		voter, match, lag := "?", "?", "?"
		switch {
		case m.ID == st.Leader:
			voter, match, lag = "yes", "-", "-"
		case st.Leader != 0:
			voter, match, lag = yesNo(m.Voter), fmt.Sprint(m.Match), fmt.Sprint(m.Lag)
		}
		role, note := m.Role, ""
		if m.Lost {
			role, note = "lost", "\t(lost its data: remove it, and add the node as a new member)"
		}
		if m.Err != nil {
			if !m.Lost {
				role, note = "unreachable", fmt.Sprintf("\t(%v)", m.Err)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t-\t-\t-%s\n", m.ID, m.Addr, role, voter, match, lag, note)
			continue
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d%s\n", m.ID, m.Addr, role, voter, match, lag, m.Term, m.Commit, m.Applied, note)
	}
	return tw.Flush()
}

// successor returns the voter other than the leader with the highest match
// index, or 0 if there is none.
func (st Status) successor() uint64 {
	var best *Member
	for i, m := range st.Members {
		if m.ID != st.Leader && m.Voter && !m.Lost && m.Err == nil && (best == nil || m.Match > best.Match) {
			best = &st.Members[i]
		}
	}
	if best == nil {
		return 0
	}
	return best.ID
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// parseInfo parses INFO's text into its fields.
func parseInfo(text string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && !strings.HasPrefix(k, "#") {
			m[k] = v
		}
	}
	return m
}

func atoi(s string) uint64 {
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}

// askInfo asks the server at addr for INFO replication, parsed.
func askInfo(ctx context.Context, addr, password string) (map[string]string, error) {
	v, err := ask.One(ctx, addr, password, "INFO", "replication")
	if err != nil {
		return nil, err
	}
	return parseInfo(string(v.Str)), nil
}
