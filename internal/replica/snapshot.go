package replica

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"

	"github.com/flintkv/flint/internal/snap"
	"github.com/flintkv/flint/internal/store"
)

// snapState tracks snapshots. The fields before running belong to the
// apply thread.
type snapState struct {
	appliedTerm uint64 // term of the last entry applied
	entries     uint64 // entries applied since the last snapshot started
	bytes       int64  // and their size
	running     atomic.Bool
	wg          sync.WaitGroup
	// files is held while a snapshot file is written and old ones pruned
	// with the log segments they cover, while one sent by the leader is
	// installed, and while the log restarts after one: package snap and
	// wal.ReleaseTo need these to not overlap.
	files sync.Mutex
	mu    sync.Mutex
	last  snapInfo // the newest snapshot on disk
}

// snapInfo describes a snapshot written.
type snapInfo struct {
	index uint64
	name  string
	size  int64
	took  time.Duration
	at    time.Time
	err   error // the last attempt's failure, if it failed
}

func (s *snapState) wait() { s.wg.Wait() }

// newest returns what is known of the newest snapshot written.
func (s *snapState) newest() snapInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// maybeSnapshot starts a background snapshot if enough has been applied
// since the last one and none is running. Taking the store's snapshot costs
// O(stripes) under its locks; writing it happens on another goroutine.
func (r *Replica) maybeSnapshot() {
	s := &r.snaps
	if s.entries >= r.opt.SnapshotEntries || s.bytes >= r.opt.SnapshotBytes {
		r.startSnapshot(nil)
	}
}

// errBusy answers a snapshot request while another snapshot is written.
var errBusy = errors.New("replica: a snapshot is being written")

// saveRequest asks the apply thread for a snapshot. Once done is closed,
// started says whether the request started one; if not, another was being
// written, and err is errBusy. For a request that waits (SAVE) and started
// one, err is the outcome of writing it.
type saveRequest struct {
	wait    bool // close done once the snapshot is durable, not once started
	started bool
	err     error
	done    chan struct{}
}

// startSnapshot starts writing a snapshot of everything applied, unless one
// is running, and reports to req if it is not nil. It runs on the apply
// thread, so that the store's view and the index match.
func (r *Replica) startSnapshot(req *saveRequest) {
	s := &r.snaps
	if s.running.Load() {
		if req != nil {
			req.err = errBusy
			close(req.done)
		}
		return
	}
	s.running.Store(true)
	meta := snap.Meta{Index: r.applied.Load(), Term: s.appliedTerm, Conf: r.conf,
		Sections: append([]snap.Section{{Name: membersSection, Data: encodeMembers(r.Members())},
			{Name: incarnationsSection, Data: r.encodeIncarnations()}}, StoreSections(r.Store())...)}
	view := r.Store().SnapshotAll()
	s.entries, s.bytes = 0, 0
	if req != nil {
		req.started = true
		if !req.wait {
			close(req.done)
			req = nil
		}
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		err := r.writeSnapshot(view, meta)
		s.running.Store(false)
		if req != nil {
			req.err = err
			close(req.done)
		}
	}()
}

// BackgroundSnapshot starts writing a snapshot of everything applied so far
// and returns without waiting for it (the BGSAVE command): its outcome is
// logged, and shown by PersistenceInfo. If a snapshot is being written, it
// starts none and returns false.
func (r *Replica) BackgroundSnapshot() (bool, error) {
	req := &saveRequest{done: make(chan struct{})}
	if !call(r, r.savec, req, req.done) {
		return false, errStopped
	}
	return req.started, nil
}

// Snapshot writes a snapshot of everything applied so far and returns once
// it is durable (the SAVE command). It waits for a snapshot already being
// written to finish first.
func (r *Replica) Snapshot() error {
	for {
		req := &saveRequest{wait: true, done: make(chan struct{})}
		if !call(r, r.savec, req, req.done) {
			return errStopped
		}
		if req.err != errBusy {
			return req.err
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-r.dead:
			return errStopped
		}
	}
}

// writeSnapshot writes view as the snapshot at meta, then lets raft and the
// WAL drop what it covers. A failure (a full disk, say) is logged and the
// next snapshot tries again; the log still holds everything.
func (r *Replica) writeSnapshot(view *store.Snapshot, meta snap.Meta) error {
	r.snaps.files.Lock()
	defer r.snaps.files.Unlock()
	start := time.Now()
	name, size, err := snap.Write(r.opt.FS, r.snapDir(), meta, func(yield func(string, []byte) bool) { view.Ascend(yield) })
	info := snapInfo{index: meta.Index, name: name, size: size, took: time.Since(start), at: time.Now(), err: err}
	if err != nil {
		r.opt.Logger.Warn("snapshot failed; the log keeps everything, and the next snapshot will try again", "index", meta.Index, "err", err)
		r.snaps.mu.Lock()
		r.snaps.last.err = err
		r.snaps.mu.Unlock()
		return err
	}
	r.snaps.mu.Lock()
	r.snaps.last = info
	r.snaps.mu.Unlock()
	r.opt.Logger.Info("snapshot written", "file", name, "index", meta.Index, "bytes", size, "took", info.took.Round(time.Millisecond))
	cs := meta.Conf
	// CreateSnapshot fails only if raft's storage holds a snapshot at
	// meta.Index or later (ErrSnapOutOfDate). Snapshots are written one at a
	// time, in order, so that is one at meta.Index: a SAVE with no write
	// since the last snapshot. Either way raft now sends a follower that
	// needs entries before the older kept snapshot the newest one.
	r.storage.CreateSnapshot(meta.Index, &cs)
	if err := r.release(); err != nil {
		r.opt.Logger.Warn("deleting old snapshots and log segments failed", "err", err)
	}
	return nil
}

// release keeps the two newest snapshots, drops from raft's storage the
// entries the older of them covers, and deletes the log segments that hold
// only such entries. Entries between the two stay readable, so a follower
// behind the newest snapshot but not the older one catches up from the log.
func (r *Replica) release() error {
	if err := snap.Prune(r.opt.FS, r.snapDir(), 2); err != nil {
		return err
	}
	snaps, err := snap.List(r.opt.FS, r.snapDir())
	if err != nil || len(snaps) == 0 {
		return err
	}
	// Compact before ReleaseTo: it needs the term of the entry at the index.
	if err := r.storage.Compact(snaps[0].Index); err != nil && !errors.Is(err, raft.ErrCompacted) {
		return err
	}
	return r.wal.ReleaseTo(snaps[0].Index)
}
