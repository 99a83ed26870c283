package replica

import (
	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/store"
)

// applyLoop is the apply thread: it applies committed entries in order,
// completes the writes waiting on them, and starts snapshots.
func (r *Replica) applyLoop() {
	for {
		var m raftpb.Message
		select {
		case m = <-r.applyc:
		case req := <-r.savec:
			r.startSnapshot(req)
			continue
		case <-r.dead:
			return
		}
		for i := range m.Entries {
			if r.reorder(&m.Entries[i]) {
				continue
			}
			if err := r.applyEntry(&m.Entries[i]); err != nil {
				r.fail(err)
				return
			}
		}
		r.notifyApplied()
		r.maybeSnapshot()
		r.trimLog()
		select {
		case r.respc <- m.Responses:
		case <-r.dead:
			return
		}
	}
}

// applyEntry applies one committed entry to the store and completes its
// waiting writes. It runs on the apply thread, and during recovery.
func (r *Replica) applyEntry(e *raftpb.Entry) error {
	switch {
	case e.Type != raftpb.EntryNormal:
		return errConfChange
	case len(e.Data) > 0:
		err := eachProposal(e.Data, func(id uint64, batch []byte) error {
			return r.applyBatch(r.waiters.take(id), batch)
		})
		if err != nil {
			return errorf("entry %d (term %d) cannot be applied: %w; the log is damaged, or was written by a newer version of Flint: run that version, or restore the data directory from a backup", e.Index, e.Term, err)
		}
	}
	r.applied.Store(e.Index)
	r.snaps.appliedTerm = e.Term
	r.snaps.entries++
	r.snaps.bytes += int64(len(e.Data))
	return nil
}

// applyBatch applies one batch, calling its caller's done after each entry,
// and completes the caller, if one waits.
func (r *Replica) applyBatch(p *proposal, batch []byte) error {
	if p == nil { // proposed before a restart, or its caller gave up
		return r.st.ApplyBatch(batch, nil)
	}
	n := 0
	err := r.st.ApplyBatch(batch, func(i int, res store.Result) {
		n++
		if p.done != nil {
			p.done(i, res)
		}
	})
	if err != nil {
		return err
	}
	r.stats.commands.Add(int64(n))
	close(p.applied)
	return nil
}

// notifyApplied wakes the raft loop, whose reads may wait for applied.
func (r *Replica) notifyApplied() {
	select {
	case r.appliedc <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// keptEntries is how many applied entries the raft log keeps in memory
// after a trim (see trimLog; a snapshot keeps only those after its index):
// what a follower that fell a little behind would be sent. Older ones are
// on disk until a snapshot covers them, and in memory they would only grow
// the heap: a durable server applying 1,500 entries a second of 30 KB each
// would otherwise hold up to SnapshotBytes of them.
const keptEntries = 1024

// trimLog drops from raft's in-memory log the entries applied more than
// keptEntries ago, once there are twice as many, unless a snapshot is being
// written: its CreateSnapshot needs the entry at its index. A snapshot
// starts only on this thread, so none can start while it trims.
//
// applied can run ahead of what raft has heard is applied (this thread's
// responses are stepped later), by up to a Ready's committed entries, which
// can be more than keptEntries (as when the log is replayed at startup).
// That is safe with one voter: raft reads no entry it has handed out to be
// applied again, and its only read from its own applied index on, of the
// configuration changes not yet applied when it campaigns, happens once,
// in start, before any entry is applied. With more voters, which campaign
// at any time, compaction must follow raft's own applied index and keep
// what lagging followers need.
func (r *Replica) trimLog() {
	first, err := r.storage.FirstIndex()
	applied := r.applied.Load()
	if err != nil || r.snaps.running.Load() || applied < first+2*keptEntries {
		return
	}
	r.storage.Compact(applied - keptEntries)
}
