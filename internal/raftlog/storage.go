// Package raftlog is raft's Storage (go.etcd.io/raft/v3) over Flint's
// write-ahead log: raft reads back the log it wrote from the WAL, so that a
// follower that is behind catches up from the log, and only one that is
// behind the last snapshot needs a snapshot.
//
// The log is a WAL of one group, or one group's log in the node's shared
// log (wal.Shared.Group), which the node's other groups write to as well.
//
// Storage keeps in memory the snapshot's metadata, the hard state and the
// latest entries (a cache bounded in bytes and in entries); older entries
// are read from the WAL (wal.WAL.Entries), and their terms come from the
// WAL's index, in memory. Its methods and errors are raft.MemoryStorage's,
// so that one replaces the other, except where MemoryStorage panics on bad
// arguments: Storage returns an error there. Snapshots are kept without
// data (CreateSnapshot takes none, and Snapshot returns the newest one's
// metadata alone): the caller sends snapshot files by other means.
//
// The caller feeds it what it makes durable, in this order: the WAL saves
// entries and the hard state, then Append and SetHardState tell the
// Storage; a snapshot is written or installed, then CreateSnapshot and
// Compact, or ApplySnapshot, tell it; only then may wal.WAL.ReleaseTo
// delete the segments the snapshot covers.
package raftlog

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/wal"
)

// Options bound the cache of the latest entries: it keeps as many as fit
// both bounds.
type Options struct {
	CacheBytes   int64 // of entries' data; default 64 MiB
	CacheEntries int   // default 16,384
}

func (o Options) withDefaults() Options {
	if o.CacheBytes <= 0 {
		o.CacheBytes = 64 << 20
	}
	if o.CacheEntries <= 0 {
		o.CacheEntries = 16384
	}
	return o
}

// Storage is raft.Storage over a WAL. Its methods may be called from any
// goroutine: raft's from the raft loop, the others from the threads that
// write the log and the snapshots.
//
// The entries it returns, and their data, are never changed by it: raft
// and the caller may keep them, and must not change them either. Entries
// reads those not in the cache from the WAL without the lock, so the WAL
// may already hold writes that Append has not been told of yet. raft never
// reads an index that such a write replaces: it reads only below its
// unstable log, which holds every write it has not heard is durable.
type Storage struct {
	log Log
	opt Options
	mu  struct {
		sync.Mutex
		hs   raftpb.HardState
		snap raftpb.SnapshotMetadata // the newest snapshot, written or installed
		// Invariant: compact <= last. The log is the entries compact+1 to
		// last; compactTerm is the term of entry compact, which raft
		// matches entries against.
		compact, compactTerm, last uint64
		// Invariant: cache holds the entries last-len(cache)+1 to last, in
		// order, all after compact (earlier ones are read from the WAL),
		// and cacheBytes is the sum of their data's lengths. No element
		// below len(cache) is written again, as raft may hold slices of it.
		cache      []raftpb.Entry
		cacheBytes int64
		// dead is at most how many entries before cache[0] its array
		// still holds (see dropFrontLocked); fewer once an append has
		// moved the cache to a larger array.
		dead int
	}
}

// Log is the log a Storage reads entries from: a *wal.WAL, or one group's
// log in a shared log, a *wal.Group. Its methods are called from any
// goroutine; see wal.WAL's for their contract.
type Log interface {
	FirstIndex() uint64
	LastIndex() uint64
	Term(i uint64) (uint64, error)
	Entries(lo, hi, maxSize uint64) ([]raftpb.Entry, error)
}

// New returns the Storage of a log whose snapshot is snap, whose hard state
// is hs, and whose entries after the snapshot are those log holds, as its
// Open read them: log must hold every entry from snap.Index+1 to its last.
func New(log Log, snap raftpb.SnapshotMetadata, hs raftpb.HardState, opt Options) (*Storage, error) {
	first, last := log.FirstIndex(), log.LastIndex()
	if first > snap.Index+1 || last < snap.Index {
		return nil, fmt.Errorf("raftlog: the log holds entries %d to %d, not every entry after the snapshot at %d", first, last, snap.Index)
	}
	s := &Storage{log: log, opt: opt.withDefaults()}
	s.mu.hs, s.mu.snap = hs, snap
	s.mu.compact, s.mu.compactTerm, s.mu.last = snap.Index, snap.Term, last
	return s, nil
}

// InitialState implements raft.Storage: the hard state last set, and the
// configuration of the newest snapshot.
func (s *Storage) InitialState() (raftpb.HardState, raftpb.ConfState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.hs, s.mu.snap.ConfState, nil
}

// SetHardState records the hard state the WAL has saved.
func (s *Storage) SetHardState(hs raftpb.HardState) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.hs = hs
	return nil
}

// FirstIndex implements raft.Storage.
func (s *Storage) FirstIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.compact + 1, nil
}

// LastIndex implements raft.Storage.
func (s *Storage) LastIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.last, nil
}

// Snapshot implements raft.Storage: the newest snapshot's metadata, without
// data.
func (s *Storage) Snapshot() (raftpb.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return raftpb.Snapshot{Metadata: s.mu.snap}, nil
}

// Term implements raft.Storage: the term of entry i, from memory. It
// returns raft.ErrCompacted for an entry before FirstIndex()-1, and
// raft.ErrUnavailable for one after LastIndex.
func (s *Storage) Term(i uint64) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case i < s.mu.compact:
		return 0, raft.ErrCompacted
	case i > s.mu.last:
		return 0, raft.ErrUnavailable
	}
	return s.termLocked(i)
}

// termLocked returns the term of entry i, one of compact to last.
func (s *Storage) termLocked(i uint64) (uint64, error) {
	if i == s.mu.compact {
		return s.mu.compactTerm, nil
	}
	if first := s.cacheFirstLocked(); i >= first {
		return s.mu.cache[i-first].Term, nil
	}
	t, err := s.log.Term(i)
	if err != nil {
		return 0, logError(err)
	}
	return t, nil
}

// Entries implements raft.Storage: the entries lo to hi-1, or the longest
// prefix of them whose total size (raftpb.Entry.Size) is at most maxSize,
// but at least one entry. It returns raft.ErrCompacted if lo is at or
// before the compaction point, and raft.ErrUnavailable if the log holds
// no entry, or (where MemoryStorage panics) if hi is after LastIndex()+1
// or before lo. The caller owns the slice returned.
func (s *Storage) Entries(lo, hi, maxSize uint64) ([]raftpb.Entry, error) {
	s.mu.Lock()
	if err := s.checkLocked(lo, hi); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	cached, from := s.cachedLocked(lo, hi)
	s.mu.Unlock()
	if from == lo {
		cached = limitSize(cached, maxSize, 0, 0)
		return cached[:len(cached):len(cached)], nil
	}
	ents, err := s.log.Entries(lo, from, maxSize)
	if err != nil {
		return nil, logError(err)
	}
	if uint64(len(ents)) < from-lo { // maxSize reached
		return ents, nil
	}
	return append(ents, limitSize(cached, maxSize, sizeOf(ents), len(ents))...), nil
}

// cachedLocked returns the entries from..hi-1 that the cache holds of the
// entries lo to hi-1: the others, lo to from-1, are read from the WAL.
func (s *Storage) cachedLocked(lo, hi uint64) (cached []raftpb.Entry, from uint64) {
	first := s.cacheFirstLocked()
	from = min(max(lo, first), hi)
	if from == hi {
		return nil, from
	}
	return s.mu.cache[from-first : hi-first], from
}

// checkLocked returns raft's error for a read of the entries lo to hi-1, if
// it may not be made.
func (s *Storage) checkLocked(lo, hi uint64) error {
	switch {
	case lo <= s.mu.compact:
		return raft.ErrCompacted
	case hi > s.mu.last+1 || hi < lo || s.mu.last == s.mu.compact:
		return raft.ErrUnavailable
	}
	return nil
}

// cacheFirstLocked returns the index of the first entry in the cache, or
// last+1 if it is empty.
func (s *Storage) cacheFirstLocked() uint64 {
	return s.mu.last + 1 - uint64(len(s.mu.cache))
}

// limitSize returns the longest prefix of ents that may follow n entries
// of total size size in a read, by raft's rule for Entries: the first
// entry, then as many as keep the total size at most max.
func limitSize(ents []raftpb.Entry, max, size uint64, n int) []raftpb.Entry {
	for i := range ents {
		size += uint64(ents[i].Size())
		if size > max && n+i > 0 {
			return ents[:i]
		}
	}
	return ents
}

// sizeOf returns the total size of ents, as raft counts it.
func sizeOf(ents []raftpb.Entry) uint64 {
	n := uint64(0)
	for i := range ents {
		n += uint64(ents[i].Size())
	}
	return n
}

// logError returns the error of the WAL's read as raft's: raft compares
// them with ==, so an entry released is raft.ErrCompacted itself. Any
// other is a broken invariant (the Storage holds an entry the WAL does not)
// or damage, which raft does not expect and panics on.
func logError(err error) error {
	if errors.Is(err, wal.ErrReleased) {
		return raft.ErrCompacted
	}
	return fmt.Errorf("raftlog: %w", err)
}

// Append adds entries that the WAL has saved, as MemoryStorage.Append does:
// entries at or before the compaction point are skipped, and an entry at
// or before the last replaces it and every entry after it. Entries that
// would leave a gap after the last are refused (MemoryStorage panics).
func (s *Storage) Append(ents []raftpb.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	first := s.mu.compact + 1
	if last := ents[0].Index + uint64(len(ents)) - 1; last < first {
		return nil
	}
	if ents[0].Index < first {
		ents = ents[first-ents[0].Index:]
	}
	if ents[0].Index > s.mu.last+1 {
		return fmt.Errorf("raftlog: entries from %d would leave a gap after the last, %d", ents[0].Index, s.mu.last)
	}
	s.truncateLocked(ents[0].Index)
	for i := range ents {
		s.mu.cacheBytes += int64(len(ents[i].Data))
	}
	s.mu.cache = append(s.mu.cache, ents...)
	s.mu.last = ents[len(ents)-1].Index
	s.trimLocked()
	return nil
}

// truncateLocked drops the entries from i on, if any, i being after
// compact.
func (s *Storage) truncateLocked(i uint64) {
	if i > s.mu.last {
		return
	}
	first := s.cacheFirstLocked()
	k := int(max(i, first) - first)
	s.dropCacheLocked(k, len(s.mu.cache))
	// Appending must copy: raft may hold slices of the entries dropped.
	// The copy leaves the dead entries behind too.
	s.mu.cache, s.mu.dead = s.mu.cache[:k:k], 0
	s.mu.last = i - 1
}

// trimLocked drops the oldest entries from the cache until it fits the
// bounds.
func (s *Storage) trimLocked() {
	n := 0
	for bytes := s.mu.cacheBytes; n < len(s.mu.cache) && (len(s.mu.cache)-n > s.opt.CacheEntries || bytes > s.opt.CacheBytes); n++ {
		bytes -= int64(len(s.mu.cache[n].Data))
	}
	s.dropCacheLocked(0, n)
	s.dropFrontLocked(n)
}

// dropFrontLocked drops the first n entries of the cache. Reslicing keeps
// them in the cache's array, with their data, until the array is
// replaced; so once more than a quarter as many are dead as are live, the
// live ones are copied to a new array (the old one may not be written:
// raft may hold slices of it), which bounds the cache's memory to 1.25
// times its bounds, not twice.
func (s *Storage) dropFrontLocked(n int) {
	s.mu.cache = s.mu.cache[n:]
	if s.mu.dead += n; s.mu.dead > len(s.mu.cache)/4 {
		s.mu.cache, s.mu.dead = slices.Clone(s.mu.cache), 0
	}
}

// dropCacheLocked takes the entries cache[from:to], about to be dropped,
// out of cacheBytes.
func (s *Storage) dropCacheLocked(from, to int) {
	for _, e := range s.mu.cache[from:to] {
		s.mu.cacheBytes -= int64(len(e.Data))
	}
}

// Compact discards the entries before i, as MemoryStorage.Compact does,
// once a snapshot at i or later is durable. It returns raft.ErrCompacted
// if i is at or before the compaction point, and an error if it is after
// the last entry (MemoryStorage panics). The WAL's segments are released
// separately (wal.WAL.ReleaseTo), after Compact.
func (s *Storage) Compact(i uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case i <= s.mu.compact:
		return raft.ErrCompacted
	case i > s.mu.last:
		return fmt.Errorf("raftlog: compacting to %d, after the last entry, %d", i, s.mu.last)
	}
	term, err := s.termLocked(i)
	if err != nil {
		return err
	}
	s.mu.compact, s.mu.compactTerm = i, term
	if first := s.cacheFirstLocked(); i >= first {
		n := int(i-first) + 1
		s.dropCacheLocked(0, n)
		s.dropFrontLocked(n)
	}
	return nil
}

// CreateSnapshot records a snapshot written at entry i, with the
// configuration cs if not nil, as MemoryStorage.CreateSnapshot does, and
// returns it without data. It returns raft.ErrSnapOutOfDate if i is at or
// before the newest snapshot, raft.ErrCompacted if it is before the
// compaction point, and an error if it is after the last entry
// (MemoryStorage panics for those two).
func (s *Storage) CreateSnapshot(i uint64, cs *raftpb.ConfState) (raftpb.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case i <= s.mu.snap.Index:
		return raftpb.Snapshot{}, raft.ErrSnapOutOfDate
	case i < s.mu.compact:
		return raftpb.Snapshot{}, raft.ErrCompacted
	case i > s.mu.last:
		return raftpb.Snapshot{}, fmt.Errorf("raftlog: a snapshot at %d, after the last entry, %d", i, s.mu.last)
	}
	term, err := s.termLocked(i)
	if err != nil {
		return raftpb.Snapshot{}, err
	}
	s.mu.snap.Index, s.mu.snap.Term = i, term
	if cs != nil {
		s.mu.snap.ConfState = *cs
	}
	return raftpb.Snapshot{Metadata: s.mu.snap}, nil
}

// ApplySnapshot replaces the log with snap, installed from a leader, as
// MemoryStorage.ApplySnapshot does: every entry is discarded, and the log
// goes on after the snapshot. Its data is not kept. It returns
// raft.ErrSnapOutOfDate if snap is not newer than the newest snapshot.
func (s *Storage) ApplySnapshot(snap raftpb.Snapshot) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := snap.Metadata
	if m.Index <= s.mu.snap.Index {
		return raft.ErrSnapOutOfDate
	}
	s.mu.snap = m
	s.mu.compact, s.mu.compactTerm, s.mu.last = m.Index, m.Term, m.Index
	s.mu.cache, s.mu.cacheBytes, s.mu.dead = nil, 0, 0
	return nil
}
