// Package store is Flint's state machine: an in-memory map from binary keys
// to binary values with an ordered index for range reads.
//
// It changes only by applying entries (see AppendEntry for their format), the
// same bytes the raft log carries, and answers reads directly. It has no
// network, disk, clock or goroutines of its own, and the outcome of applying a
// sequence of entries depends on nothing else.
//
// The map is split into shards, each with its own lock, so that commands on
// different keys run on different cores without contending. A command that
// touches several keys locks their shards in ascending order and is atomic as
// a whole. Each shard keeps a hash map for point reads and a copy-on-write
// B-tree for ordered reads; cloning every B-tree under the locks gives a
// consistent view that range reads and snapshots iterate without holding any
// lock, so neither stalls writes for longer than the clones take.
package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/maphash"
	"math/bits"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/google/btree"
)

// Errors returned in Result.Err. They are the client's fault, not the store's.
var (
	ErrNotInteger = errors.New("store: value is not an integer or out of range")
	ErrOverflow   = errors.New("store: increment or decrement would overflow")
	ErrTooLarge   = errors.New("store: string exceeds maximum allowed size")
)

// Options configure a Store.
type Options struct {
	Shards   int // number of shards, rounded up to a power of two; default DefaultShards()
	MaxValue int // longest value APPEND may build, in bytes; default 64 MiB
}

// Store is the state machine. All methods are safe for concurrent use.
type Store struct {
	seed     maphash.Seed
	mask     uint64
	maxValue int
	shards   []shard
	every    lockSet // every shard, in order
	retain   bool    // see Retain
}

// shard owns the keys that hash to it.
type shard struct {
	mu struct {
		sync.RWMutex
		// Invariant: m and tree hold the same pairs. Bytes within len of a
		// stored value are never modified: readers and snapshots share them.
		m    map[string]item
		tree *btree.BTreeG[item]
	}
	keys  atomic.Int64 // number of keys, written under mu
	bytes atomic.Int64 // sum of key and value lengths, written under mu
	_     [64]byte     // keep neighbouring shards' locks off one cache line
}

// item is one pair. The map holds it too, so that an overwrite finds the
// stored key string there and need not search the tree for it.
//
// Invariant: pre is the first 16 bytes of key, zero-padded, as big-endian
// integers. Comparing pre first orders items as their keys would be ordered,
// but without following the key pointer for most comparisons: the B-tree
// search then stays inside its node's memory.
type item struct {
	pre [2]uint64
	key string
	val []byte
}

func newItem(key string, val []byte) item { return item{pre: prefix(key), key: key, val: val} }

// prefix packs the first 16 bytes of key, zero-padded, big-endian.
func prefix(key string) [2]uint64 {
	var b [16]byte
	copy(b[:], key)
	return [2]uint64{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

func itemLess(a, b item) bool {
	if a.pre[0] != b.pre[0] {
		return a.pre[0] < b.pre[0]
	}
	if a.pre[1] != b.pre[1] {
		return a.pre[1] < b.pre[1]
	}
	return a.key < b.key // equal padded prefixes: only the full keys can tell
}

// New returns an empty Store.
func New(opt Options) *Store {
	if opt.Shards <= 0 {
		opt.Shards = DefaultShards()
	}
	if opt.MaxValue <= 0 {
		opt.MaxValue = 64 << 20
	}
	n := 1 << bits.Len(uint(opt.Shards-1))
	s := &Store{seed: maphash.MakeSeed(), mask: uint64(n - 1), maxValue: opt.MaxValue, shards: make([]shard, n)}
	for i := range s.shards {
		s.shards[i].resetLocked()
	}
	s.every = make(lockSet, n)
	for i := range s.every {
		s.every[i] = i
	}
	return s
}

// DefaultShards is 8 shards per processor, at least 16. More shards spread
// writers over more locks; fewer make range reads cheaper, since a range
// merges every shard's tree.
func DefaultShards() int { return max(16, 8*runtime.GOMAXPROCS(0)) }

func (sh *shard) resetLocked() {
	sh.mu.m = make(map[string]item)
	sh.mu.tree = btree.NewG(32, itemLess)
	sh.keys.Store(0)
	sh.bytes.Store(0)
}

func (s *Store) shardOf(key []byte) int { return int(maphash.Bytes(s.seed, key) & s.mask) }

// Len returns the number of keys.
func (s *Store) Len() int64 {
	var n int64
	for i := range s.shards {
		n += s.shards[i].keys.Load()
	}
	return n
}

// Bytes returns the total length of all keys and values.
func (s *Store) Bytes() int64 {
	var n int64
	for i := range s.shards {
		n += s.shards[i].bytes.Load()
	}
	return n
}

// getLocked returns the value of key; the shard's lock must be held.
func (sh *shard) getLocked(key []byte) ([]byte, bool) {
	it, ok := sh.mu.m[string(key)]
	return it.val, ok
}

// lookupLocked returns key's item, for a write that then calls replaceLocked.
func (sh *shard) lookupLocked(key []byte) (item, bool) {
	it, ok := sh.mu.m[string(key)]
	return it, ok
}

// putLocked stores val, which the store now owns, under key.
func (sh *shard) putLocked(key, val []byte) {
	old, found := sh.lookupLocked(key)
	sh.replaceLocked(old, found, key, val)
}

// replaceLocked stores val under key, whose current item lookupLocked
// returned as old and found: passing them saves a second map lookup.
func (sh *shard) replaceLocked(old item, found bool, key, val []byte) {
	if !found {
		sh.insertLocked(newItem(string(key), val))
		return
	}
	// Reuse the stored key string: an overwrite allocates only the value.
	it := item{old.pre, old.key, val}
	sh.mu.m[it.key] = it
	sh.mu.tree.ReplaceOrInsert(it)
	sh.bytes.Add(int64(len(val) - len(old.val)))
}

// insertLocked stores it, without looking its key up first: it counts as
// a new key unless the tree reports that it replaced one.
func (sh *shard) insertLocked(it item) {
	sh.mu.m[it.key] = it
	old, replaced := sh.mu.tree.ReplaceOrInsert(it)
	if replaced {
		sh.bytes.Add(int64(len(it.val) - len(old.val)))
		return
	}
	sh.keys.Add(1)
	sh.bytes.Add(int64(len(it.key) + len(it.val)))
}

// deleteLocked removes key and reports whether it existed.
func (sh *shard) deleteLocked(key []byte) bool {
	old, ok := sh.mu.m[string(key)]
	if !ok {
		return false
	}
	delete(sh.mu.m, string(key))
	sh.mu.tree.Delete(newItem(string(key), nil))
	sh.keys.Add(-1)
	sh.bytes.Add(-int64(len(key) + len(old.val)))
	return true
}

// lockSet is a sorted, duplicate-free set of shard indexes.
type lockSet []int

func (s *Store) lockSetOf(keys [][]byte, stride int) lockSet {
	ls := make(lockSet, 0, len(keys)/stride)
	for i := 0; i < len(keys); i += stride {
		ls = append(ls, s.shardOf(keys[i]))
	}
	slices.Sort(ls)
	return slices.Compact(ls)
}

func (s *Store) lock(ls lockSet) {
	for _, i := range ls {
		s.shards[i].mu.Lock()
	}
}

func (s *Store) unlock(ls lockSet) {
	for _, i := range ls {
		s.shards[i].mu.Unlock()
	}
}

func (s *Store) rlock(ls lockSet) {
	for _, i := range ls {
		s.shards[i].mu.RLock()
	}
}

func (s *Store) runlock(ls lockSet) {
	for _, i := range ls {
		s.shards[i].mu.RUnlock()
	}
}

// clone returns copy-on-write clones of every shard's tree, taken at one
// instant. Cost: O(shards); later writes copy the nodes they touch.
func (s *Store) clone() []*btree.BTreeG[item] {
	// Clone writes to the tree it clones (it gives it a fresh copy-on-write
	// context), so it needs the write locks: two snapshots taken under read
	// locks raced on that field.
	s.lock(s.every)
	defer s.unlock(s.every)
	trees := make([]*btree.BTreeG[item], len(s.shards))
	for i := range s.shards {
		trees[i] = s.shards[i].mu.tree.Clone()
	}
	return trees
}

func equal(a, b []byte) bool { return bytes.Equal(a, b) }
