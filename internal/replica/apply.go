package replica

import (
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/batchentry"
	"github.com/flintkv/flint/internal/bugs"
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
		if bugs.On(bugs.AckEarly) && m.Type == raftpb.MsgStorageAppend { // see sendEarly
			if err := r.applyEarly(m.Entries); err != nil {
				r.fail(err)
				return
			}
			continue
		}
		if m.Snapshot != nil && !raft.IsEmptySnap(*m.Snapshot) {
			if err := r.installSnapshot(m.Snapshot.Metadata); err != nil {
				r.fail(err)
				return
			}
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
		if err := r.applyConfEntry(e); err != nil {
			return err
		}
	case isRegistration(e.Data):
		if err := r.applyRegistration(e); err != nil {
			return err
		}
	case len(e.Data) > 0 && !r.appliedEarly(e):
		if err := r.applyData(e); err != nil {
			return err
		}
	}
	r.applied.Store(e.Index)
	r.snaps.appliedTerm = e.Term
	r.snaps.entries++
	r.snaps.bytes += int64(len(e.Data))
	return nil
}

// applyData applies the batches of a normal entry with data, and
// completes the writes waiting on them.
func (r *Replica) applyData(e *raftpb.Entry) error {
	at := store.Stamp{Index: e.Index, Time: batchentry.Time(e.Data)}
	err := batchentry.Each(e.Data, func(id uint64, batch []byte) error {
		return r.applyBatch(r.waiters.take(id), batch, at)
	})
	if err != nil {
		return errorf("entry %d (term %d) cannot be applied: %w; the log is damaged, or was written by a newer version of Flint: run that version, or restore the data directory from a backup", e.Index, e.Term, err)
	}
	return nil
}

// applyBatch applies one batch, calling its caller's done after each entry,
// and completes the caller, if one waits.
func (r *Replica) applyBatch(p *proposal, batch []byte, at store.Stamp) error {
	if p == nil { // proposed before a restart, or its caller gave up
		return r.Store().ApplyBatchAt(batch, at, nil)
	}
	n := 0
	err := r.Store().ApplyBatchAt(batch, at, func(i int, res store.Result) {
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
