package replica

import (
	"encoding/binary"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/batchentry"
	"github.com/flintkv/flint/internal/bugs"
	"github.com/flintkv/flint/internal/store"
)

// reorder is the injected bug bugs.Reorder, on the apply thread: an entry
// whose batches are all plain SETs is acknowledged at once but applied only
// after the next entry with data. It exists to prove that flint check
// catches reordered writes; see package bugs. It reports whether it took
// care of e.
func (r *Replica) reorder(e *raftpb.Entry) bool {
	if !bugs.On(bugs.Reorder) || len(e.Data) == 0 || isRegistration(e.Data) {
		return false
	}
	if r.held != nil {
		r.applyEntry(e)
		batchentry.Each(r.held, func(_ uint64, batch []byte) error {
			return r.Store().ApplyBatch(batch, nil)
		})
		r.held = nil
		return true
	}
	sets := true
	batchentry.Each(e.Data, func(_ uint64, batch []byte) error {
		sets = sets && plainSets(batch) > 0
		return nil
	})
	if !sets {
		return false
	}
	batchentry.Each(e.Data, func(id uint64, batch []byte) error {
		if p := r.waiters.take(id); p != nil {
			for i := range plainSets(batch) {
				if p.done != nil {
					p.done(i, store.Result{Done: true})
				}
			}
			close(p.applied)
		}
		return nil
	})
	r.held = append([]byte(nil), e.Data...)
	r.applied.Store(e.Index)
	return true
}

// plainSets returns the number of entries in a store batch if they are all
// SETs without flags, and 0 otherwise. It reads the batch and entry formats
// documented in package store.
func plainSets(batch []byte) int {
	n := 0
	for len(batch) > 0 {
		l, w := binary.Uvarint(batch)
		if w <= 0 || int(l) > len(batch)-w || l < 3 {
			return 0
		}
		e := batch[w : w+int(l)]
		if store.Op(e[1]) != store.OpSet || e[2] != 0 {
			return 0
		}
		batch, n = batch[w+int(l):], n+1
	}
	return n
}

// earlyEntry is an entry that the injected bug bugs.AckEarly applied before
// it was committed: its index and term.
type earlyEntry struct{ index, term uint64 }

// sendEarly is the injected bug bugs.AckEarly, on the append thread: once
// ents are durable in this member's log, it hands the apply thread those
// that this member proposed, as leader, to apply and acknowledge at once
// (applyEarly), before a majority has them. A leader cut off from its
// peers so acknowledges writes until CheckQuorum deposes it, and the next
// leader, which never had them, loses them. It exists to prove that flint
// check catches lost acknowledged writes; see package bugs. The append
// thread sends it before it responds to raft, and raft applies only
// entries it knows are durable here, so the apply thread gets every entry
// early before it gets it committed. It reports whether the replica may go
// on.
func (r *Replica) sendEarly(ents []raftpb.Entry) bool {
	if !bugs.On(bugs.AckEarly) {
		return true
	}
	var own []raftpb.Entry // ents is the append thread's, reused
	for _, e := range ents {
		if e.Type == raftpb.EntryNormal && r.proposedHere(e.Data) {
			own = append(own, e)
		}
	}
	if len(own) == 0 {
		return true
	}
	select {
	case r.applyc <- raftpb.Message{Type: raftpb.MsgStorageAppend, Entries: own}:
		return true
	case <-r.dead:
		return false
	}
}

// proposedHere reports whether raft entry data holds batches that this
// member proposed: their ids carry its member id (see newID).
func (r *Replica) proposedHere(data []byte) bool {
	here := false
	if len(data) > 0 {
		batchentry.Each(data, func(id uint64, _ []byte) error {
			here = id>>32 == r.id
			return nil
		})
	}
	return here
}

// applyEarly is the injected bug bugs.AckEarly, on the apply thread: it
// applies ents, durable in this member's log but not known to be
// committed, completes their writes, and remembers them, so that once
// they commit appliedEarly skips them. Entries that another leader's
// replaced are never undone: their writes stay applied here.
func (r *Replica) applyEarly(ents []raftpb.Entry) error {
	for i := range ents {
		e := &ents[i]
		n := 0
		for n < len(r.early) && r.early[n].index < e.Index {
			n++
		}
		r.early = append(r.early[:n], earlyEntry{e.Index, e.Term}) // e replaced those from its index on
		if err := r.applyData(e); err != nil {
			return err
		}
	}
	return nil
}

// appliedEarly reports whether the committed entry e was applied already,
// by applyEarly: the same index and term make the same entry. It forgets
// the entries applied early up to e.
func (r *Replica) appliedEarly(e *raftpb.Entry) bool {
	if !bugs.On(bugs.AckEarly) {
		return false
	}
	for len(r.early) > 0 && r.early[0].index < e.Index {
		r.early = r.early[1:]
	}
	if len(r.early) == 0 || r.early[0].index != e.Index {
		return false
	}
	same := r.early[0].term == e.Term
	r.early = r.early[1:]
	return same
}

// staleLeaderRead is the injected bug bugs.StaleLeaderRead, on the raft
// loop: while this member has led and has heard of no other leader since
// (l.led), even once CheckQuorum has made it step down, it completes the
// reads waiting for a read index at once, from whatever it has applied. A
// leader cut off from its peers so serves reads while the majority's new
// leader takes writes. It exists to prove that flint check catches stale
// reads; see package bugs. It reports whether it completed them.
func (l *loop) staleLeaderRead() bool {
	if !bugs.On(bugs.StaleLeaderRead) || !l.led {
		return false
	}
	for _, w := range l.unled {
		close(w.done)
	}
	clear(l.unled)
	l.unled = l.unled[:0]
	return true
}

// noteLeader keeps l.led for staleLeaderRead, as lead now leads: set once
// this member leads, and cleared once another does, but not while none
// does.
func (l *loop) noteLeader(lead uint64) {
	if bugs.On(bugs.StaleLeaderRead) {
		l.led = lead == l.r.id || l.led && lead == raft.None
	}
}
