package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"

	"github.com/flintkv/flint/internal/batchentry"
	"github.com/flintkv/flint/internal/vfs"
)

// Limits on what one raft entry carries.
const (
	maxEntryBytes = 8 << 20 // stop adding batches to an entry past this size
)

// Limits on the entries on their way to another member, and to this
// member's log; all count entries' data, as raft does. They are variables
// for tests.
//
// maxMsgBytes is raft's MaxSizePerMsg: the entries of one append message
// (at least one entry, whatever its size).
//
// maxInflightBytes is raft's MaxInflightBytes: the entries sent to one
// follower that it has not acknowledged, which it does once they are
// durable in its log. Raft stops sending at it, so at most
// maxInflightBytes plus one message are in flight (and raft's
// MaxInflightMsgs, 256, bounds the messages). Only while it replicates,
// though: while raft probes a follower (after a rejection, or a report
// that it is unreachable), it sends one message at a time outside the
// bound, and again at every heartbeat that follower answers until it
// acknowledges one; the window starts empty once it does, with those
// perhaps still on their way.
//
// For a follower that catches up from the log it bounds what the leader
// holds for it (the entries read back from the log, in the transport's
// queue), what the follower holds before it writes it, and what the raft
// loop reads from disk in one turn: raft reads the entries it sends from
// its Storage in the loop, synchronously, and etcd raft v3.6 has no way to
// take them later (Storage.Entries returns them, ErrCompacted, which sends
// a snapshot instead, or any other error, on which raft panics), so those
// reads stay on the loop. Without it, the 256 messages of 1 MiB of a
// member 1 GiB behind held 3.4 to 4.7 GiB of Go heap on the members
// (docs/PERFORMANCE.md). It caps a follower's replication at
// maxInflightBytes per round trip (send, write, fsync, acknowledgement):
// about 320 MiB/s at 50 ms, more than a member here writes (1 GiB in 6.7 s
// at best). It must stay below the transport's QueueBytes (64 MiB): a
// message dropped for a full queue makes raft probe the follower, and its
// window starts empty again while the messages sent before are still on
// their way.
//
// maxAppendBytes bounds the entries handed to the append thread and not
// yet written (see handAppend): whatever a leader sends, a member holds no
// more than that before writing it, and no write of the log carries more.
// It is twice maxInflightBytes, so that a leader of this version never
// makes a follower wait.
var (
	maxMsgBytes      uint64 = 1 << 20
	maxInflightBytes uint64 = 16 << 20
	maxAppendBytes   int64  = 32 << 20
)

// loop is the raft loop's state; only the raft loop touches it.
type loop struct {
	r        *Replica
	rn       *raft.RawNode
	nextRead uint64
	reads    map[uint64][]*readWait // read-index requests raft has not answered
	ready    []readGroup            // answered, waiting for the store to apply up to index
	unled    []*readWait            // no read-index request made for them yet (none can be while no leader is known)
	lead     uint64                 // the leader raft last reported, or raft.None
	ticks    uint64                 // raft ticks since start, for reissueTicks
	// While this member knows no leader, every LeaderWait (at sweptAt) the
	// writes and reads that were waiting at the last sweep fail: the first
	// staleProps of props and staleReads of unled.
	unled0                 bool
	sweptAt                time.Time
	staleProps, staleReads int
	props                  []*proposal                 // held: see proposeHeld
	held                   int                         // their batches' bytes
	resps                  []raftpb.Message            // storage threads' responses that send took, not yet stepped
	out                    map[uint64][]raftpb.Message // messages to other members, by member, until flushed
	led                    bool                        // only with the injected bug bugs.StaleLeaderRead: see noteLeader
}

// readGroup is the reads that one read-index request serves.
type readGroup struct {
	index uint64
	waits []*readWait
}

// start creates the RawNode and starts the three goroutines.
func (r *Replica) start() error {
	rn, err := raft.NewRawNode(&raft.Config{
		ID: r.id, ElectionTick: r.opt.ElectionTicks, HeartbeatTick: r.opt.HeartbeatTicks,
		Storage: r.storage, Applied: r.applied.Load(),
		MaxSizePerMsg: maxMsgBytes, MaxInflightMsgs: 256, MaxInflightBytes: maxInflightBytes, MaxUncommittedEntriesSize: 1 << 30,
		CheckQuorum: true, PreVote: true, StepDownOnRemoval: true, AsyncStorageWrites: true, Logger: raftLogger{r.opt.Logger},
	})
	if err != nil {
		return errorf("starting raft: %w", err)
	}
	if r.solo() {
		if err := rn.Campaign(); err != nil {
			return errorf("starting raft: %w", err)
		}
	}
	l := &loop{r: r, rn: rn, reads: make(map[uint64][]*readWait), out: make(map[uint64][]raftpb.Message), unled0: true, sweptAt: time.Now()}
	r.wg.Add(3)
	go func() { defer r.wg.Done(); l.run() }()
	go func() { defer r.wg.Done(); r.appendLoop() }()
	go func() { defer r.wg.Done(); r.applyLoop() }()
	go func() { r.wg.Wait(); close(r.exited) }()
	return nil
}

// run is the raft loop.
func (l *loop) run() {
	tick := time.NewTicker(l.r.opt.TickInterval)
	defer tick.Stop()
	defer l.stopOnStorageError()
	for {
		if len(l.resps) > 0 { // taken by send: step them before anything new
			l.step(l.resps)
			clear(l.resps)
			l.resps = l.resps[:0]
		} else {
			select {
			case p := <-l.r.propc:
				l.hold(p)
			case w := <-l.r.readc:
				l.readIndex(w)
			case msgs := <-l.r.respc:
				l.step(msgs)
			case m := <-l.r.recvc:
				l.stepPeer(m)
			case rep := <-l.r.reportc:
				l.report(rep)
			case req := <-l.r.confc:
				l.proposeConf(req)
			case ca := <-l.r.confApplyc:
				l.applyConf(ca)
			case c := <-l.r.statusc:
				c <- l.rn.Status()
			case <-l.r.appliedc:
				l.releaseReads()
			case <-tick.C:
				l.tick()
			case <-l.r.dead:
				l.abandon()
				return
			}
		}
		l.proposeHeld()
		if l.rn.HasReady() {
			l.handleReady(l.rn.Ready())
		}
		l.issueReads()
	}
}

// reissueTicks is how many ticks read-index requests may go unanswered
// before they are made again: a request forwarded to the leader, the
// leader's answer, or the heartbeats that confirm a leader's, may be lost
// on the way.
const reissueTicks = 10

// tick advances raft's clock, and makes again the read-index requests
// unanswered for reissueTicks.
func (l *loop) tick() {
	l.rn.Tick()
	l.ticks++
	if l.ticks%reissueTicks == 0 {
		l.requeueReads()
	}
	if l.ticks%registerTicks == 0 {
		l.register()
		l.handOffIfFull()
	}
	if l.unled0 && time.Since(l.sweptAt) >= l.r.opt.LeaderWait {
		l.sweepUnled()
	}
}

// handOffIfFull hands leadership, if this member has it and its disk is
// full, to the voter that is furthest along of those it is replicating to
// (not probing: those are likely down), so that the group accepts
// writes again: a leader refuses them while its disk is full, though the
// others could commit them without it. The voter is sent what it lacks
// (sending does not wait for this member's own writes) and takes over once
// it has every entry.
func (l *loop) handOffIfFull() {
	if !l.r.noSpace.Load() || l.lead != l.r.id {
		return
	}
	st := l.rn.Status()
	if st.LeadTransferee != raft.None {
		return
	}
	to, best := uint64(raft.None), uint64(0)
	for id, pr := range st.Progress {
		if id != l.r.id && !pr.IsLearner && pr.State == tracker.StateReplicate && pr.Match > best {
			to, best = id, pr.Match
		}
	}
	if to == raft.None {
		return
	}
	l.r.opt.Logger.Warn("the disk is full: handing leadership to the member furthest along", "to", to, "match", best, "term", st.Term)
	l.rn.TransferLeader(to)
}

// sweepUnled fails, with ErrNoLeader, the writes and reads that were
// waiting for a leader at the last sweep, one Options.LeaderWait ago:
// nothing was proposed for them, and their clients may try another
// member. So each waits between one and two LeaderWaits.
func (l *loop) sweepUnled() {
	for _, p := range l.props[:l.staleProps] {
		l.held -= len(p.batch)
		p.err = ErrNoLeader
		close(p.applied)
	}
	n := copy(l.props, l.props[l.staleProps:])
	clear(l.props[n:])
	l.props = l.props[:n]
	l.requeueReads()
	for _, w := range l.unled[:min(l.staleReads, len(l.unled))] {
		w.err = ErrNoLeader
		close(w.done)
	}
	l.unled = l.unled[min(l.staleReads, len(l.unled)):]
	l.staleProps, l.staleReads, l.sweptAt = len(l.props), len(l.unled), time.Now()
}

// requeueReads moves the reads whose read-index request is unanswered back
// to unled, to be requested again; an answer to the old request is
// ignored.
func (l *loop) requeueReads() {
	for id, waits := range l.reads {
		l.unled = append(l.unled, waits...)
		delete(l.reads, id)
	}
}

// stopOnStorageError turns raft's panic on an error its Storage returned
// (panic(err): reading the log back from disk failed) into a failure of
// the replica, which stops it like a failed fsync does. raft panics with a
// string for broken invariants of its own, which stay panics.
func (l *loop) stopOnStorageError() {
	p := recover()
	if p == nil {
		return
	}
	err, ok := p.(error)
	if !ok {
		panic(p)
	}
	l.r.fail(errorf("reading the log back: %w", err))
	l.abandon()
}

// hold takes p and every other waiting batch, to be proposed together by
// proposeHeld.
func (l *loop) hold(p *proposal) {
	l.props = append(l.props, p)
	l.held += len(p.batch)
	for l.held < maxEntryBytes {
		select {
		case p := <-l.r.propc:
			l.props = append(l.props, p)
			l.held += len(p.batch)
			continue
		default:
		}
		break
	}
}

// proposeHeld proposes the held batches as one raft entry once the append
// thread is done with every message handed to it, or once they reach
// maxEntryBytes. Batches that arrive during a write could not be written
// before it ends anyway; held, they make one entry rather than one each,
// which saves raft, the log and the apply thread the work of the others.
// If the disk is full, it fails them at once: the loop turns at least every
// tick, so a held batch learns of a full disk within a tick (Options.TickInterval).
//
// A member that does not lead refuses them (ErrNotLeader) if it knows a
// leader, and holds them while it knows none, until one is elected or
// their callers give up.
func (l *loop) proposeHeld() {
	switch {
	case len(l.props) == 0:
		return
	case l.lead == raft.None:
		return
	case l.lead != l.r.id:
		l.finish(ErrNotLeader)
	case l.r.noSpace.Load():
		l.finish(ErrNoSpace)
	case l.held < maxEntryBytes && l.r.appending.Load() > 0:
		return
	default:
		l.propose()
	}
	clear(l.props)
	l.props, l.held = l.props[:0], 0
}

// propose packs the held batches into one raft entry.
func (l *loop) propose() {
	if l.refuseUnfit(); len(l.props) == 0 {
		return
	}
	if l.claim(); len(l.props) == 0 {
		return
	}
	// Propose copies nothing: the entry keeps data, so it is new each time,
	// and made its full size at once rather than grown.
	need := 9 + binary.MaxVarintLen64
	for _, p := range l.props {
		need += 2*binary.MaxVarintLen64 + len(p.batch)
	}
	data := batchentry.AppendHeader(make([]byte, 0, need), time.Now().UnixNano(), len(l.props))
	for _, p := range l.props {
		data = batchentry.Append(data, p.id, p.batch)
		p.batch = nil
		l.r.waiters.add(p)
		p.state.Store(proposed)
	}
	if err := l.rn.Propose(data); err != nil {
		err = fmt.Errorf("%w: raft refused the proposal: %w", ErrNotLeader, err)
		for _, p := range l.props {
			if l.r.waiters.take(p.id) != nil {
				p.err = err
				close(p.applied)
			}
		}
	}
}

// claim drops from the held proposals those whose callers gave up, and
// marks the others as being proposed: from then on their callers wait for
// them to be proposed before they may give up (see Replica.abandon).
func (l *loop) claim() {
	kept := l.props[:0]
	for _, p := range l.props {
		if p.state.CompareAndSwap(pending, claimed) {
			kept = append(kept, p)
		}
	}
	clear(l.props[len(kept):])
	l.props = kept
}

// bigBatch is the size from which a batch is checked against the disk's
// free space before it is proposed. Smaller ones are not, to spare the
// statfs: if one does not fit, the disk is full to within a MiB, and the
// write waits for space like any other (see save).
const bigBatch = 1 << 20

// refuseUnfit completes with ErrNoSpace, and drops from the held
// proposals, every batch of bigBatch or more that the disk's free space
// could not take (with a MiB to spare). Once logged, an entry that can
// never be written would hold up every write after it, however little
// space they need.
func (l *loop) refuseUnfit() {
	var avail int64
	asked, known := false, false
	kept := l.props[:0]
	for _, p := range l.props {
		big := len(p.batch) >= bigBatch
		if big && !asked {
			avail, known = vfs.Available(l.r.opt.FS, l.r.walDir())
			asked = true
		}
		if big && known && int64(len(p.batch))+bigBatch > avail {
			p.err = fmt.Errorf("%w (this write needs %d KiB free, with a MiB to spare, and %d KiB are)",
				ErrNoSpace, (len(p.batch)+bigBatch)>>10, max(avail, 0)>>10)
			close(p.applied)
			continue
		}
		avail -= int64(len(p.batch))
		kept = append(kept, p)
	}
	clear(l.props[len(kept):])
	l.props = kept
}

// finish completes the held proposals with err.
func (l *loop) finish(err error) {
	for _, p := range l.props {
		p.err = err
		close(p.applied)
	}
}

// readIndex queues w and every other waiting read, and asks raft for the
// commit index on behalf of them all.
func (l *loop) readIndex(w *readWait) {
	l.unled = append(l.unled, w)
	for {
		select {
		case w := <-l.r.readc:
			l.unled = append(l.unled, w)
			continue
		default:
		}
		break
	}
	l.issueReads()
}

// issueReads sends one read-index request for the queued reads, once this
// node leads and has committed an entry of its own term. Raft drops the
// requests of a member that knows no leader, and a follower's request
// (forwarded to the leader) can be lost with its message: see tick. With
// one voter it answers at
// once with its commit index, which right after a restart may not yet
// cover entries that were acknowledged before the crash: those are
// committed, with everything before them, by the new term's first entry.
func (l *loop) issueReads() {
	if len(l.unled) == 0 || l.staleLeaderRead() {
		return
	}
	st := l.rn.BasicStatus()
	switch {
	case st.Lead == raft.None:
		return
	case st.RaftState != raft.StateLeader:
		// raft forwards the request to the leader.
	default:
		if term, err := l.r.storage.Term(st.Commit); err != nil || term != st.Term {
			return
		}
	}
	l.nextRead++
	l.reads[l.nextRead] = l.unled
	l.unled = nil
	l.rn.ReadIndex(l.readContext(l.nextRead))
}

// readContext is the context of read-index request id: this member's id
// and the request's, 8 bytes each, big-endian. The leader keys pending
// requests by context, its own and its followers' alike, and ignores one
// whose context is pending already: contexts must differ across members.
func (l *loop) readContext(id uint64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(make([]byte, 0, 16), l.r.id), id)
}

// readID returns the request id of a read state's context, if this member
// made the request.
func (l *loop) readID(ctx []byte) (uint64, bool) {
	if len(ctx) != 16 || binary.BigEndian.Uint64(ctx) != l.r.id {
		return 0, false
	}
	return binary.BigEndian.Uint64(ctx[8:]), true
}

// step delivers storage threads' responses to raft, and sends those that
// raft addressed to other members, which had to wait until the storage
// thread was done (a follower acknowledges entries once they are durable).
func (l *loop) step(msgs []raftpb.Message) {
	defer l.flush()
	for _, m := range msgs {
		if m.To != l.r.id {
			l.queue(m)
			continue
		}
		err := l.rn.Step(m)
		if errors.Is(err, raft.ErrStepPeerNotFound) {
			// A storage thread's answer that comes after a configuration
			// that removed this member: raft takes the member's own
			// acknowledgement for a stranger's. Dropped, as etcd-raft's
			// node drops responses from members it does not know.
			continue
		}
		if err != nil {
			l.r.fail(errorf("raft refused a local message: %w", err))
			return
		}
	}
}

// handleReady routes storage messages to their threads and read-index
// answers to their reads.
func (l *loop) handleReady(rd raft.Ready) {
	if rd.SoftState != nil && rd.SoftState.Lead != l.lead {
		l.leaderChanged(rd.SoftState.Lead)
	}
	for _, rs := range rd.ReadStates {
		id, ok := l.readID(rs.RequestCtx)
		if !ok {
			continue
		}
		if waits, ok := l.reads[id]; ok {
			l.ready = append(l.ready, readGroup{index: rs.Index, waits: waits})
			delete(l.reads, id)
		}
	}
	l.releaseReads()
	for _, m := range rd.Messages {
		switch m.To {
		case raft.LocalAppendThread:
			l.handAppend(m)
		case raft.LocalApplyThread:
			l.send(l.r.applyc, m)
		default:
			l.queue(m)
		}
	}
	l.flush()
}

// leaderChanged records that lead now leads, as raft reports. A member
// that stops leading fails the writes it proposed that are not yet applied
// (their outcome is unknown: the new leader may commit them or not), and
// reads waiting for a read index from a former leader ask again.
func (l *loop) leaderChanged(lead uint64) {
	term := l.rn.BasicStatus().Term
	l.r.opt.Logger.Info("leader changed", "member", l.r.id, "term", term, "leader", lead, "was", l.lead)
	if l.lead == l.r.id {
		l.r.waiters.fail(errLeadershipLost)
	}
	l.lead = lead
	l.r.lead.Store(lead)
	l.noteLeader(lead)
	l.requeueReads()
	l.register()
	l.unled0, l.sweptAt, l.staleProps, l.staleReads = lead == raft.None, time.Now(), 0, 0
}

// handAppend hands m to the append thread once the entries it has been
// handed and has not written, with m's, are at most maxAppendBytes, or
// once it has none: a single larger message still goes, and one without
// entries (a hard state, responses) never waits. Meanwhile the loop
// steps nothing and does not tick, as while appendc is full: messages from
// other members wait in recvc (past recvQueue they are dropped, which raft
// recovers from as from any loss), and a leader's proposals in propc. A
// follower of a leader of this version never waits here: it holds at most
// maxInflightBytes and a message that it has not acknowledged. A leader
// proposes while a write is in progress only entries of maxEntryBytes, so
// it waits only once four of them came during one write: its disk is that
// far behind, or full (it then refuses writes, see proposeHeld, and if
// it waits long enough its followers elect another leader).
func (l *loop) handAppend(m raftpb.Message) {
	n := entryBytes(m.Entries)
	full := func() bool { held := l.r.appendBytes.Load(); return n > 0 && held > 0 && held+n > maxAppendBytes }
	if full() {
		l.r.stats.appendWaits.Add(1)
	}
	for full() {
		select {
		case <-l.r.appendRoom:
		case msgs := <-l.r.respc:
			l.resps = append(l.resps, msgs...)
		case ca := <-l.r.confApplyc: // the apply thread may wait for it
			l.applyConf(ca)
		case <-l.r.dead:
			return
		}
	}
	l.r.appending.Add(1)
	l.r.appendBytes.Add(n)
	l.send(l.r.appendc, m)
}

// entryBytes is the size of ents' data, which is what raft counts of
// entries against its limits.
func entryBytes(ents []raftpb.Entry) int64 {
	n := int64(0)
	for i := range ents {
		n += int64(len(ents[i].Data))
	}
	return n
}

// send hands m to a storage thread. While c is full it takes the storage
// threads' responses too, to step on the loop's next turn: a thread that
// waits to send the loop a response may be the one that would empty c.
func (l *loop) send(c chan raftpb.Message, m raftpb.Message) {
	for {
		select {
		case c <- m:
			return
		case msgs := <-l.r.respc:
			l.resps = append(l.resps, msgs...)
		case ca := <-l.r.confApplyc: // the apply thread may wait for it
			l.applyConf(ca)
		case <-l.r.dead:
			return
		}
	}
}

// releaseReads completes the reads whose index has been applied.
func (l *loop) releaseReads() {
	n, applied := 0, l.r.applied.Load()
	for _, g := range l.ready {
		if g.index > applied {
			l.ready[n] = g
			n++
			continue
		}
		for _, w := range g.waits {
			close(w.done)
		}
	}
	clear(l.ready[n:])
	l.ready = l.ready[:n]
}

// abandon fails the reads still waiting; proposals fail through dead.
func (l *loop) abandon() {
	l.reads[0] = l.unled
	for _, waits := range l.reads {
		for _, w := range waits {
			w.err = errStopped
			close(w.done)
		}
	}
}
