package hostgroup

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/flintkv/flint/internal/batchentry"
	"github.com/flintkv/flint/internal/replica"
	"github.com/flintkv/flint/internal/snap"
	"github.com/flintkv/flint/internal/store"
)

// StateMachine is a group's store as the multiraft.StateMachine of a Host:
// it applies each entry's batches (package batchentry) at the entry's
// index and leader's time, and calls the done of the Backend.Apply waiting
// for a batch, on this node, after each of its entries takes effect.
type StateMachine struct {
	opt     store.Options
	st      atomic.Pointer[store.Store] // replaced whole by Restore
	applied atomic.Uint64               // the index of the last entry applied
	mu      sync.Mutex
	calls   map[uint64]*call // the Applies waiting here, by the id their entry carries
}

// call is one Backend.Apply waiting for its batch to be applied.
type call struct {
	done func(i int, res store.Result)
	err  error         // the store's, set before applied is closed
	over chan struct{} // closed once the batch is applied
}

// NewStateMachine returns the state machine of a new, empty store.
func NewStateMachine(opt store.Options) *StateMachine {
	sm := &StateMachine{opt: opt, calls: map[uint64]*call{}}
	sm.st.Store(store.New(opt))
	return sm
}

// Store returns the store. Hold it for one read only: Restore replaces it.
func (sm *StateMachine) Store() *store.Store { return sm.st.Load() }

// Applied returns the index of the last entry with data applied.
func (sm *StateMachine) Applied() uint64 { return sm.applied.Load() }

// add registers c as waiting for the batch with id.
func (sm *StateMachine) add(id uint64, c *call) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	sm.calls[id] = c
}

// take removes and returns the call waiting for the batch with id, or nil:
// none was made here, or it gave up.
func (sm *StateMachine) take(id uint64) *call {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	c := sm.calls[id]
	delete(sm.calls, id)
	return c
}

// Apply implements multiraft.StateMachine. An entry that does not decode
// or apply means a damaged log (every batch was checked before it was
// proposed): the node stops rather than diverge from its group.
func (sm *StateMachine) Apply(index uint64, data []byte) any {
	at := store.Stamp{Index: index, Time: batchentry.Time(data)}
	err := batchentry.Each(data, func(id uint64, batch []byte) error {
		c := sm.take(id)
		if c == nil {
			return sm.Store().ApplyBatchAt(batch, at, nil)
		}
		c.err = sm.Store().ApplyBatchAt(batch, at, c.done)
		close(c.over)
		return c.err
	})
	if err != nil {
		panic(fmt.Sprintf("hostgroup: entry %d cannot be applied: %v; the log is damaged, or was written by a newer version of Flint", index, err))
	}
	sm.applied.Store(index)
	return nil
}

// Snapshot captures the state as of the last entry applied. It is called
// on the group's apply goroutine and is cheap (store.SnapshotAll is);
// write, called later on another goroutine while Apply goes on, writes
// that state: a snapshot in the format of package snap, with the sections
// a replica writes of its store (replica.StoreSections).
func (sm *StateMachine) Snapshot() (write func(w io.Writer) error, err error) {
	st := sm.Store()
	meta := snap.Meta{Index: sm.applied.Load(), Sections: replica.StoreSections(st)}
	view := st.SnapshotAll()
	return func(w io.Writer) error {
		_, err := snap.WriteTo(w, meta, view.Ascend)
		return err
	}, nil
}

// Restore replaces the state with one that a Snapshot's write wrote,
// which it reads from r one frame at a time (snap.ReadFrom): its memory is
// the new store, whose values are copies, and a frame, never the
// snapshot. A snapshot that is damaged or cut short, or an error reading
// r, fails it and leaves the state as it was.
func (sm *StateMachine) Restore(r io.Reader) error {
	st := store.New(sm.opt)
	meta, err := snap.ReadFrom(r, func(key, val []byte) error {
		st.Put(key, bytes.Clone(val))
		return nil
	})
	if err == nil {
		err = replica.RestoreSections(st, meta.Sections)
	}
	if err != nil {
		return fmt.Errorf("hostgroup: restoring a snapshot: %w", err)
	}
	sm.st.Swap(st).Replaced() // so that the server's expirer watches st
	sm.applied.Store(meta.Index)
	return nil
}
