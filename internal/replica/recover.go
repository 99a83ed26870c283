package replica

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/raftlog"
	"github.com/flintkv/flint/internal/snap"
	"github.com/flintkv/flint/internal/store"
	"github.com/flintkv/flint/internal/vfs"
	"github.com/flintkv/flint/internal/wal"
)

// recovery is the state rebuilt from disk at startup.
type recovery struct {
	r       *Replica
	snap    snap.Meta // the snapshot loaded
	applied uint64    // last entry applied to the store
	term    uint64    // its term
	hs      raftpb.HardState
	pending []raftpb.Entry // entries after the commit index, not yet applied
	// confPending stops replay's applying at the first configuration
	// change: committed entries from it on are in pending.
	confPending bool
}

// recover rebuilds the store and raft's storage from the data directory.
func (r *Replica) recover() error {
	fs := r.opt.FS
	// The writes below wait for space on a full disk.
	wait := r.untilSpace(minSpace)
	for _, d := range []string{r.snapDir(), r.walDir()} { // each makes r.opt.Dir too
		if err := vfs.RetryNoSpace(func() error { return vfs.MkdirAll(fs, d) }, wait); err != nil {
			return errorf("%w", err)
		}
	}
	meta, err := r.loadSnapshot(wait)
	if err != nil {
		return err
	}
	if err := r.warnIfNoLog(meta.Index); err != nil {
		return err
	}
	rc := &recovery{r: r, snap: meta, applied: meta.Index, term: meta.Term}
	r.conf = meta.Conf
	members, err := membersOf(meta.Sections)
	if err != nil {
		return err
	}
	r.setMembers(members)
	if err := r.restoreIncarnations(meta.Sections); err != nil {
		return err
	}
	// Replayed entries are mapped and never change: the store keeps their
	// values without copying them. As for the snapshot, the process may
	// pause its collector during replay: a collection would mark the
	// growing store again and again (a sixth of the replay's CPU), while
	// the garbage replay makes is a fraction of the log, whose size the
	// snapshot thresholds bound.
	r.Store().Retain(true)
	resume := r.opt.PauseGC()
	r.wal, err = wal.Open(fs, r.walDir(), wal.Options{SegmentSize: r.opt.SegmentSize, NoSync: r.opt.NoSync,
		Preallocate: r.opt.Preallocate, HoldProcessor: r.opt.HoldProcessor, Logger: r.opt.Logger, WaitForSpace: wait},
		meta.Index, wal.Replay{Entry: rc.entry, HardState: rc.hardState})
	resume()
	r.Store().Retain(false)
	if err != nil {
		return err
	}
	if err := rc.finish(); err != nil {
		r.wal.Close()
		return err
	}
	return nil
}

// loadSnapshot loads the newest snapshot into a new store, bootstrapping an
// empty directory first; wait is called when bootstrapping finds the disk
// full (see untilSpace).
func (r *Replica) loadSnapshot(wait func(error) bool) (snap.Meta, error) {
	fs := r.opt.FS
	if err := snap.Prune(fs, r.snapDir(), 2); err != nil {
		return snap.Meta{}, err
	}
	// A process that died between renaming a snapshot into place and
	// syncing the directory leaves it listed, but a power loss would take
	// it: make it durable before the log and new writes rely on it.
	if err := fs.SyncDir(r.snapDir()); err != nil {
		return snap.Meta{}, errorf("fsync %s: %w", r.snapDir(), err)
	}
	snaps, err := snap.List(fs, r.snapDir())
	if err != nil {
		return snap.Meta{}, err
	}
	if len(snaps) == 0 {
		if err := vfs.RetryNoSpace(r.bootstrap, wait); err != nil {
			return snap.Meta{}, err
		}
		if snaps, err = snap.List(fs, r.snapDir()); err != nil {
			return snap.Meta{}, err
		}
	}
	newest := snaps[len(snaps)-1]
	st, meta, err := r.loadStore(newest)
	if err != nil {
		return meta, withAdvice(err, snaps)
	}
	r.st.Store(st)
	r.snaps.last = snapInfo{index: meta.Index, name: newest.Name}
	return meta, nil
}

// loadStore loads the snapshot file info names into a new store. The
// store's hash tables are made at their final size, so that loading makes
// almost no garbage: every byte read is kept by the store; and the process
// may pause its collector meanwhile (Options.PauseGC).
func (r *Replica) loadStore(info snap.Info) (*store.Store, snap.Meta, error) {
	st := store.New(r.opt.Store)
	name := path.Join(r.snapDir(), info.Name)
	if n, ok := snap.CountHint(r.opt.FS, name); ok {
		st.Reserve(int(n))
	}
	resume := r.opt.PauseGC()
	meta, err := snap.Load(r.opt.FS, name, st.Put)
	resume()
	if err == nil && (meta.Index != info.Index || meta.Term != info.Term) {
		err = fmt.Errorf("snapshot %s: its header says index %d term %d", info.Name, meta.Index, meta.Term)
	}
	if err == nil {
		err = RestoreSections(st, meta.Sections)
	}
	return st, meta, err
}

// StoreSections returns the snapshot sections of a store's state besides
// its pairs (sessions, watches, deadlines), taken at once with its
// snapshot (store.SnapshotAll), between two batches.
func StoreSections(st *store.Store) []snap.Section {
	return []snap.Section{{Name: sessionsSection, Data: st.Sessions()}, {Name: watchesSection, Data: st.Watches()},
		{Name: deadlinesSection, Data: st.Deadlines()}}
}

// RestoreSections restores into st, loaded with a snapshot's pairs, the
// sections of it that StoreSections wrote; it ignores the others.
func RestoreSections(st *store.Store, sections []snap.Section) error {
	var err error
	for _, s := range sections {
		switch {
		case err != nil:
		case s.Name == sessionsSection:
			err = st.RestoreSessions(s.Data)
		case s.Name == watchesSection:
			err = st.RestoreWatches(s.Data)
		case s.Name == deadlinesSection:
			err = st.RestoreDeadlines(s.Data)
		}
	}
	return err
}

// sessionsSection is the snapshot section that holds the store's client
// sessions (store.Sessions), taken on the apply thread with the store's
// view, so that exactly-once retries survive a restart and reach a member
// that installs the snapshot.
const sessionsSection = "sessions"

// watchesSection is the snapshot section that holds the store's watch
// table (store.Watches), taken with the sessions, so that a member restored
// from a snapshot decides the transactions that watched keys as the others
// do. A snapshot written before transactions has none: the table is then
// empty.
const watchesSection = "watches"

// deadlinesSection is the snapshot section that holds the keys' deadlines
// and the store's clock (store.Deadlines), taken on the apply thread with
// the store's view. A snapshot without it, of a Flint before expiry, has
// no key with a deadline.
const deadlinesSection = "deadlines"

// withAdvice tells the operator what to do about a damaged newest snapshot.
func withAdvice(err error, snaps []snap.Info) error {
	if len(snaps) < 2 {
		return fmt.Errorf("%w; no older snapshot is kept: restore the data directory from a backup", err)
	}
	return fmt.Errorf("%w; to start from the older snapshot %s and the log after it, move %s out of the snap directory",
		err, snaps[len(snaps)-2].Name, snaps[len(snaps)-1].Name)
}

// bootIndex is the index of a new data directory's snapshot.
const bootIndex = 1

// bootstrap makes a new data directory: an empty snapshot at index 1, term 1,
// whose configuration is Options.Voters, the same on every first member;
// or, for a member that joins a group (Options.Join), an empty snapshot at
// index 0 with no configuration, so that it waits for its leader's. A log
// without any snapshot is a damaged directory, not a new one.
func (r *Replica) bootstrap() error {
	has, err := r.hasLog()
	if err != nil {
		return err
	}
	if has {
		return errorf("%s holds a log but %s holds no snapshot: the snapshot is missing; restore the data directory from a backup",
			r.walDir(), r.snapDir())
	}
	meta := snap.Meta{Index: bootIndex, Term: 1, Conf: raftpb.ConfState{Voters: r.opt.Voters},
		Sections: []snap.Section{{Name: membersSection, Data: encodeMembers(r.opt.Members)}}}
	if r.opt.Join {
		meta = snap.Meta{}
	}
	if _, _, err := snap.Write(r.opt.FS, r.snapDir(), meta, func(func(string, []byte) bool) {}); err != nil {
		return err
	}
	r.opt.Logger.Info("initialized a new data directory", "dir", r.opt.Dir)
	return nil
}

// hasLog reports whether the log's directory holds a segment.
func (r *Replica) hasLog() (bool, error) {
	names, err := r.opt.FS.ReadDir(r.walDir())
	if err != nil {
		return false, errorf("%w", err)
	}
	return slices.ContainsFunc(names, func(n string) bool { return strings.HasSuffix(n, ".wal") }), nil
}

// warnIfNoLog logs a warning if the log's directory holds no segment while
// the snapshot, at index, is not the one a new directory starts with: the
// log is never deleted whole, so it was moved aside, to start from the
// snapshot alone, or lost, with any writes acknowledged after the
// snapshot. Either way a new log starts after the snapshot.
func (r *Replica) warnIfNoLog(index uint64) error {
	if index <= bootIndex {
		return nil
	}
	has, err := r.hasLog()
	if err == nil && !has {
		r.opt.Logger.Warn("the log directory holds no log: starting a new one after the snapshot; "+
			"writes acknowledged after the snapshot, if there were any, are lost (expected only if the directory was moved aside to start from the snapshot alone)",
			"dir", r.walDir(), "snapshot_index", index)
	}
	return err
}

// entry receives a log entry during replay.
func (rc *recovery) entry(e raftpb.Entry) error {
	if e.Index <= rc.applied {
		return nil // in the snapshot or applied already; committed entries never change
	}
	for len(rc.pending) > 0 && rc.pending[len(rc.pending)-1].Index >= e.Index {
		rc.pending = rc.pending[:len(rc.pending)-1] // replaced by a later leader
	}
	rc.pending = append(rc.pending, e)
	return rc.applyTo(rc.hs.Commit)
}

// hardState receives a hard state record during replay.
func (rc *recovery) hardState(hs raftpb.HardState) error {
	rc.hs = hs
	return rc.applyTo(hs.Commit)
}

// applyTo applies the pending entries up to the commit index.
func (rc *recovery) applyTo(commit uint64) error {
	n := 0
	for ; !rc.confPending && n < len(rc.pending) && rc.pending[n].Index <= commit; n++ {
		e := &rc.pending[n]
		if e.Type != raftpb.EntryNormal {
			// Raft must apply it (RawNode.ApplyConfChange): it and the
			// entries after it are left to the apply thread, which raft
			// hands the committed entries after Applied to.
			rc.confPending = true
			break
		}
		if err := rc.r.applyEntry(e); err != nil {
			return err
		}
		rc.applied, rc.term = e.Index, e.Term
	}
	rc.pending = append(rc.pending[:0], rc.pending[n:]...)
	return nil
}

// finish hands the recovered state to raft's storage, which serves the
// entries after the snapshot from the log: those applied during replay,
// which a follower may still need, and those not yet committed.
func (rc *recovery) finish() error {
	r := rc.r
	r.applied.Store(rc.applied)
	r.snaps.appliedTerm = rc.term
	if len(rc.pending) > 0 && rc.pending[0].Index != rc.applied+1 {
		return errorf("the log resumes at entry %d after entry %d was applied: entries are missing; restore the data directory from a backup", rc.pending[0].Index, rc.applied)
	}
	hs := rc.hs
	hs.Term = max(hs.Term, rc.term)
	hs.Commit = max(hs.Commit, rc.applied)
	var err error
	r.storage, err = raftlog.New(r.wal, raftpb.SnapshotMetadata{Index: rc.snap.Index, Term: rc.snap.Term, ConfState: r.conf}, hs, raftlog.Options{})
	if err != nil {
		return errorf("restoring raft state: %w", err)
	}
	return nil
}
