package replica

import (
	"encoding/binary"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/bugs"
	"github.com/flintkv/flint/internal/store"
)

// reorder is the injected bug bugs.Reorder, on the apply thread: an entry
// whose batches are all plain SETs is acknowledged at once but applied only
// after the next entry with data. It exists to prove that flint check
// catches reordered writes; see package bugs. It reports whether it took
// care of e.
func (r *Replica) reorder(e *raftpb.Entry) bool {
	if !bugs.On(bugs.Reorder) || len(e.Data) == 0 {
		return false
	}
	if r.held != nil {
		r.applyEntry(e)
		eachProposal(r.held, func(_ uint64, batch []byte) error {
			return r.Store().ApplyBatch(batch, nil)
		})
		r.held = nil
		return true
	}
	sets := true
	eachProposal(e.Data, func(_ uint64, batch []byte) error {
		sets = sets && plainSets(batch) > 0
		return nil
	})
	if !sets {
		return false
	}
	eachProposal(e.Data, func(id uint64, batch []byte) error {
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
