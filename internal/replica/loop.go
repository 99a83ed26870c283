package replica

import (
	"encoding/binary"
	"fmt"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/vfs"
)

// Limits on what one raft entry carries.
const (
	maxEntryBytes = 8 << 20 // stop adding batches to an entry past this size
	tickInterval  = 100 * time.Millisecond
)

// loop is the raft loop's state; only the raft loop touches it.
type loop struct {
	r        *Replica
	rn       *raft.RawNode
	nextRead uint64
	reads    map[uint64][]*readWait // read-index requests raft has not answered
	ready    []readGroup            // answered, waiting for the store to apply up to index
	unled    []*readWait            // arrived while this node did not lead; raft would drop them
	props    []*proposal            // held: see proposeHeld
	held     int                    // their batches' bytes
	resps    []raftpb.Message       // storage threads' responses that send took, not yet stepped
}

// readGroup is the reads that one read-index request serves.
type readGroup struct {
	index uint64
	waits []*readWait
}

// start creates the RawNode and starts the three goroutines.
func (r *Replica) start() error {
	rn, err := raft.NewRawNode(&raft.Config{
		ID: nodeID, ElectionTick: 10, HeartbeatTick: 1, Storage: r.storage, Applied: r.applied.Load(),
		MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 256, MaxUncommittedEntriesSize: 1 << 30,
		CheckQuorum: true, PreVote: true, AsyncStorageWrites: true, Logger: raftLogger{r.opt.Logger},
	})
	if err != nil {
		return errorf("starting raft: %w", err)
	}
	if err := rn.Campaign(); err != nil {
		return errorf("starting raft: %w", err)
	}
	l := &loop{r: r, rn: rn, reads: make(map[uint64][]*readWait)}
	r.wg.Add(3)
	go func() { defer r.wg.Done(); l.run() }()
	go func() { defer r.wg.Done(); r.appendLoop() }()
	go func() { defer r.wg.Done(); r.applyLoop() }()
	go func() { r.wg.Wait(); close(r.exited) }()
	return nil
}

// run is the raft loop.
func (l *loop) run() {
	tick := time.NewTicker(tickInterval)
	defer tick.Stop()
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
			case <-l.r.appliedc:
				l.releaseReads()
			case <-tick.C:
				l.rn.Tick()
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
// tick, so a held batch learns of a full disk within tickInterval.
func (l *loop) proposeHeld() {
	switch {
	case len(l.props) == 0:
		return
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
	// Propose copies nothing: the entry keeps data, so it is new each time,
	// and made its full size at once rather than grown.
	need := 1 + binary.MaxVarintLen64
	for _, p := range l.props {
		need += 2*binary.MaxVarintLen64 + len(p.batch)
	}
	data := append(make([]byte, 0, need), entryVersion)
	data = binary.AppendUvarint(data, uint64(len(l.props)))
	for _, p := range l.props {
		p.id = l.r.nextID.Add(1)
		l.r.waiters.add(p)
		data = appendProposal(data, p.id, p.batch)
		p.batch = nil
	}
	if err := l.rn.Propose(data); err != nil {
		for _, p := range l.props {
			l.r.waiters.take(p.id)
		}
		l.finish(errorf("proposal refused: %w", err))
	}
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
// requests of a node that does not lead; and with one voter it answers at
// once with its commit index, which right after a restart may not yet
// cover entries that were acknowledged before the crash: those are
// committed, with everything before them, by the new term's first entry.
func (l *loop) issueReads() {
	if len(l.unled) == 0 {
		return
	}
	st := l.rn.BasicStatus()
	if st.RaftState != raft.StateLeader {
		return
	}
	if term, err := l.r.storage.Term(st.Commit); err != nil || term != st.Term {
		return
	}
	l.nextRead++
	l.reads[l.nextRead] = l.unled
	l.unled = nil
	l.rn.ReadIndex(binary.BigEndian.AppendUint64(nil, l.nextRead))
}

// step delivers storage threads' responses to raft.
func (l *loop) step(msgs []raftpb.Message) {
	for _, m := range msgs {
		if err := l.rn.Step(m); err != nil {
			l.r.fail(errorf("raft refused a local message: %w", err))
			return
		}
	}
}

// handleReady routes storage messages to their threads and read-index
// answers to their reads.
func (l *loop) handleReady(rd raft.Ready) {
	for _, rs := range rd.ReadStates {
		id := binary.BigEndian.Uint64(rs.RequestCtx)
		l.ready = append(l.ready, readGroup{index: rs.Index, waits: l.reads[id]})
		delete(l.reads, id)
	}
	l.releaseReads()
	for _, m := range rd.Messages {
		switch m.To {
		case raft.LocalAppendThread:
			l.r.appending.Add(1)
			l.send(l.r.appendc, m)
		case raft.LocalApplyThread:
			l.send(l.r.applyc, m)
		default:
			// One voter: nobody else to send to.
		}
	}
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
			w.err = ErrStopped
			close(w.done)
		}
	}
}
