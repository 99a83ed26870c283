package multiraft

import (
	"sync"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/transport"
)

// liveness is what a host knows of its peer nodes: one heartbeat a tick
// between each two nodes (group 0), whatever groups they share, stands for
// the heartbeats of their quiesced groups.
type liveness struct {
	mu    sync.Mutex
	ticks uint64            // ticks so far
	peers map[uint64]uint64 // peer node -> the tick it was last heard at
}

func (l *liveness) init() { l.peers = map[uint64]uint64{} }

// addPeer makes node one that beat sends to, heard now.
func (l *liveness) addPeer(node uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.peers[node]; !ok {
		l.peers[node] = l.ticks
	}
}

// heard records a message from node.
func (l *liveness) heard(node uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.peers[node]; ok {
		l.peers[node] = l.ticks
	}
}

// beat counts a tick and sends every peer node the host's heartbeat.
func (l *liveness) beat(s transport.Sender) {
	l.mu.Lock()
	l.ticks++
	peers := make([]uint64, 0, len(l.peers))
	for p := range l.peers {
		peers = append(peers, p)
	}
	l.mu.Unlock()
	for _, p := range peers {
		s.Send(p, 0, []raftpb.Message{{Type: raftpb.MsgHeartbeat, To: p}})
	}
}

// silent reports whether node, a peer, has not been heard from for more
// than ticks ticks. This node is never silent.
func (l *liveness) silent(node uint64, ticks int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	last, ok := l.peers[node]
	return ok && l.ticks-last > uint64(ticks)
}

// quiesceLeader quiesces g if this node leads it and it is idle: every
// member holds every entry, all committed and applied here. It tells the
// followers so. g.mu is held.
func (h *Host) quiesceLeader(g *group) {
	if g.rd != nil || g.rn.HasReady() || g.lead.Load() != h.cfg.Node || len(g.reads) > 0 || len(g.readWaits) > 0 {
		return
	}
	st := g.rn.Status()
	last, _ := g.storage.LastIndex()
	if st.RaftState != raft.StateLeader || st.Commit != last || st.Applied != last || st.LeadTransferee != 0 {
		return
	}
	for _, pr := range st.Progress {
		if pr.Match != last {
			return
		}
	}
	var msgs []raftpb.Message
	for id := range st.Progress {
		if id != h.cfg.Node {
			msgs = append(msgs, raftpb.Message{Type: raftpb.MsgHeartbeat, To: id, From: h.cfg.Node, Term: st.Term, Commit: last, Context: quiesceContext})
		}
	}
	g.qlead.Store(h.cfg.Node)
	g.quiesced.Store(true)
	for _, m := range msgs {
		h.cfg.Sender.Send(m.To, g.id, []raftpb.Message{m})
	}
}

// quiesceFollower quiesces g on its leader's quiesce message m if this
// member follows m's sender in m's term and holds, has committed and has
// applied every entry up to m's commit and no later one. It reports
// whether m is done with: taken, or stale; while the member has a write
// or a Ready pending, or has not yet learned of m's commit, m waits for
// the next turn. g.mu is held.
func (g *group) quiesceFollower(m *raftpb.Message) bool {
	if g.rd != nil || g.rn.HasReady() {
		return false
	}
	st := g.rn.Status()
	last, _ := g.storage.LastIndex()
	switch {
	case st.Lead != m.From || st.Term != m.Term || last > m.Commit:
		return true // another leader or term, or entries since
	case st.Commit != m.Commit || last != m.Commit || st.Applied != last:
		return false
	}
	g.qlead.Store(m.From)
	g.quiesced.Store(true)
	return true
}
