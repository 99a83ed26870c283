package replica

import (
	"errors"
	"slices"
	"sync"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/backoff"
	"github.com/flintkv/flint/internal/snap"
)

// This file is the replica's side of the peer transport: Replica
// implements transport.Handler for its group, and the raft loop hands
// raft's messages for other members to Options.Peers.

// recvQueue is how many messages from other members wait for the raft loop
// at most, and recvQueueBytes how many bytes of entries' data; more are
// dropped, which raft recovers from as from any loss. The byte bound keeps
// a peer (an older version without raft's MaxInflightBytes, or a faulty
// one, whose frames may be up to the transport's limit) from filling the
// queue's 4,096 places with GiBs; a message with more than recvQueueBytes
// of entries is taken when the queue holds none.
const (
	recvQueue      = 4096
	recvQueueBytes = 64 << 20
)

// report is what the transport says of another member, for the raft loop.
type report struct {
	member   uint64
	snapshot bool // a snapshot stream ended (else: messages were dropped)
	failed   bool // the snapshot stream failed
}

// solo reports whether this member is its group's only voter, so that it
// may lead without an election.
func (r *Replica) solo() bool {
	v := r.conf.Voters
	return len(v) == 1 && v[0] == r.id && len(r.conf.VotersOutgoing) == 0
}

// Receive takes raft messages that member from sent to this one
// (transport.Handler). It never blocks: when the raft loop is that far
// behind, messages are dropped, as the network may drop them.
func (r *Replica) Receive(from, group uint64, msgs []raftpb.Message) {
	for _, m := range msgs {
		if m.To != r.id || m.From != from || raft.IsLocalMsg(m.Type) {
			continue // misrouted, or a peer posing as a local thread
		}
		if isVote(m.Type) && r.LostMember(from) {
			continue // a member whose data was lost: see incarnation.go
		}
		n := entryBytes(m.Entries)
		if q := r.recvBytes.Add(n); q > recvQueueBytes && q != n {
			r.recvBytes.Add(-n)
			r.stats.dropped.Add(1)
			continue
		}
		select {
		case r.recvc <- m:
		default:
			r.recvBytes.Add(-n)
			r.stats.dropped.Add(1)
		}
	}
}

// DroppedMessages returns how many messages from other members Receive
// dropped because the raft loop was that far behind.
func (r *Replica) DroppedMessages() int64 { return r.stats.dropped.Load() }

// Unreachable is the transport saying that messages to member to were
// dropped (transport.Handler): raft then probes it rather than streaming.
func (r *Replica) Unreachable(to, group uint64) {
	select {
	case r.reportc <- report{member: to}:
	default: // the loop is busy; the next drop reports it again
	}
}

// SnapshotDone is the end of a snapshot stream to member to
// (transport.Handler). It is not dropped: raft sends that member nothing
// else until it hears. A failure is reported only after a wait (see
// snapshotRetries), since raft sends the snapshot again as soon as it
// hears.
func (r *Replica) SnapshotDone(to, group uint64, err error) {
	rep := report{member: to, snapshot: true, failed: err != nil}
	wait := r.snapRetries.after(to, err)
	if err != nil {
		r.opt.Logger.Warn("sending a snapshot failed; it is sent again later", "member", to, "in", wait.Round(time.Millisecond), "err", err)
	}
	go func() {
		select {
		case <-time.After(wait):
		case <-r.dead:
			return
		}
		select {
		case r.reportc <- rep:
		case <-r.dead:
		}
	}()
}

// Waits before a failed snapshot stream is reported to raft, which then
// sends the snapshot again: about snapshotRetryMin after the first failure
// in a row to a member, doubling up to snapshotRetryMax. A member whose
// disk is full refuses snapshots until space is freed (see
// ReceiveSnapshot), and would otherwise be streamed the snapshot, and log
// its refusal, at every heartbeat.
const (
	snapshotRetryMin = 500 * time.Millisecond
	snapshotRetryMax = 30 * time.Second
)

// snapshotRetries is the schedule of each member's failed snapshot
// streams in a row.
type snapshotRetries struct {
	mu sync.Mutex
	m  map[uint64]*backoff.Backoff // by member; none after a success
}

// after returns how long to wait before reporting the end of a stream to
// member to that ended with err (nil: at once), and advances or resets
// its schedule.
func (s *snapshotRetries) after(to uint64, err error) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		delete(s.m, to)
		return 0
	}
	if s.m == nil {
		s.m = make(map[uint64]*backoff.Backoff)
	}
	b, ok := s.m[to]
	if !ok {
		nb := backoff.New(snapshotRetryMin, snapshotRetryMax)
		b = &nb
		s.m[to] = b
	}
	return b.Next()
}

// stepBatch is the most messages from other members that the raft loop
// steps in one turn, so that a stream of them never holds up its Ready.
const stepBatch = 256

// stepPeer steps a message from another member, and up to stepBatch-1
// others waiting.
func (l *loop) stepPeer(m raftpb.Message) {
	for n := 1; ; n++ {
		l.r.recvBytes.Add(-entryBytes(m.Entries)) // taken from recvc
		if err := l.checkHeartbeat(m); err != nil {
			l.r.fail(err)
			return
		}
		if err := l.rn.Step(m); err != nil && !errors.Is(err, raft.ErrStepPeerNotFound) {
			l.r.opt.Logger.Debug("raft ignored a message", "from", m.From, "type", m.Type, "err", err)
		}
		if n == stepBatch {
			return
		}
		select {
		case m = <-l.r.recvc:
			continue
		default:
		}
		return
	}
}

// report tells raft what the transport said of another member.
func (l *loop) report(rep report) {
	switch {
	case !rep.snapshot:
		l.rn.ReportUnreachable(rep.member)
	case rep.failed:
		l.rn.ReportSnapshot(rep.member, raft.SnapshotFailure)
	default:
		l.rn.ReportSnapshot(rep.member, raft.SnapshotFinish)
	}
}

// queue keeps m, for another member, until flush.
func (l *loop) queue(m raftpb.Message) {
	if m.Type == raftpb.MsgSnap {
		l.sendSnapshot(m)
		return
	}
	l.out[m.To] = append(l.out[m.To], m)
}

// flush hands the queued messages to the transport, one call per member.
func (l *loop) flush() {
	for to, msgs := range l.out {
		if len(msgs) > 0 {
			l.r.opt.Peers.Send(to, l.r.opt.Group, msgs)
			l.out[to] = nil // the transport keeps msgs
		}
	}
}

// sendSnapshot streams the snapshot file that m names to its member, or
// tells raft at once that it cannot. A member added after the newest
// snapshot was taken would refuse it (raft installs no snapshot whose
// configuration lacks it): then a new snapshot is started instead, which
// raft sends on a later try.
func (l *loop) sendSnapshot(m raftpb.Message) {
	if !inConf(m.Snapshot.Metadata.ConfState, m.To) {
		l.r.opt.Logger.Info("taking a snapshot for a member added since the last", "member", m.To)
		l.r.snapshotSoon()
		l.rn.ReportSnapshot(m.To, raft.SnapshotFailure)
		return
	}
	info, err := l.r.snapFile(m.Snapshot.Metadata)
	if err == nil {
		body, size, oerr := snap.OpenFile(l.r.opt.FS, l.r.snapDir(), info.Name)
		if err = oerr; err == nil {
			l.r.opt.Peers.SendSnapshot(m.To, l.r.opt.Group, m, body, size)
			return
		}
	}
	l.r.opt.Logger.Warn("cannot send a snapshot", "member", m.To, "err", err)
	l.rn.ReportSnapshot(m.To, raft.SnapshotFailure)
}

// inConf reports whether member id is in configuration cs, in any role.
func inConf(cs raftpb.ConfState, id uint64) bool {
	for _, ids := range [][]uint64{cs.Voters, cs.Learners, cs.VotersOutgoing, cs.LearnersNext} {
		if slices.Contains(ids, id) {
			return true
		}
	}
	return false
}

// snapshotSoon starts a background snapshot without waiting, unless a
// request for one is on its way already.
func (r *Replica) snapshotSoon() {
	if !r.snapWanted.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer r.snapWanted.Store(false)
		r.BackgroundSnapshot()
	}()
}
