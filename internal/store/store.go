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
		// Invariant: m maps each key to its cell, and tree holds one item
		// for each key, pointing to the same cell. Bytes within len of a
		// stored value are never modified: readers and snapshots share them.
		m    map[string]*cell
		tree *btree.BTreeG[item]
		// gen counts the clones of tree (see cell). It grows by one with
		// each clone.
		gen uint64
	}
	keys  atomic.Int64 // number of keys, written under mu
	bytes atomic.Int64 // sum of key and value lengths, written under mu
	_     [64]byte     // keep neighbouring shards' locks off one cache line
}

// cell holds one key's value; the shard's map and its tree's item for the
// key both point to it. So a write to a key changes only its cell, and
// leaves the map and the tree, whose search costs more than the rest of the
// write, alone, unless a clone of the tree may share the cell.
//
// Invariant: a cell with gen equal to its shard's gen was made after the
// tree's last clone, so no clone holds it, and a write may change its val in
// place, under the shard's lock. A cell with an older gen may be in a clone,
// which reads it without any lock: it never changes again, and a write to
// its key makes a new cell and puts it in the map and the tree.
type cell struct {
	key string // the stored key, so that a write reuses it rather than allocating
	val []byte
	gen uint64
}

// value returns the value in c, or nil if c is nil.
func (c *cell) value() []byte {
	if c == nil {
		return nil
	}
	return c.val
}

// item is one pair in a shard's tree.
//
// Invariant: pre is the first 16 bytes of key, zero-padded, as big-endian
// integers. Comparing pre first orders items as their keys would be ordered,
// but without following the key pointer for most comparisons: the B-tree
// search then stays inside its node's memory.
type item struct {
	pre [2]uint64
	key string
	c   *cell
}

// probe returns an item that searches the tree for key.
func probe(key string) item { return item{pre: prefix(key), key: key} }

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
	sh.mu.m = make(map[string]*cell)
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
	c, ok := sh.mu.m[string(key)]
	return c.value(), ok
}

// lookupLocked returns key's cell, or nil, for a write that then calls
// replaceLocked.
func (sh *shard) lookupLocked(key []byte) *cell { return sh.mu.m[string(key)] }

// putLocked stores val, which the store now owns, under key.
func (sh *shard) putLocked(key, val []byte) {
	sh.replaceLocked(sh.lookupLocked(key), key, val)
}

// replaceLocked stores val under key, whose cell lookupLocked returned as
// old: passing it saves a second map lookup.
func (sh *shard) replaceLocked(old *cell, key, val []byte) {
	if old == nil {
		sh.insertLocked(string(key), val)
		return
	}
	sh.bytes.Add(int64(len(val) - len(old.val)))
	if old.gen == sh.mu.gen {
		old.val = val
		return
	}
	// A clone may hold old. Reuse the stored key string: the write
	// allocates only the value and the cell.
	c := &cell{key: old.key, val: val, gen: sh.mu.gen}
	sh.mu.m[c.key] = c
	sh.mu.tree.ReplaceOrInsert(item{prefix(c.key), c.key, c})
}

// insertLocked stores val under key, without looking key up first: it
// counts as a new key unless the tree reports that it replaced one.
func (sh *shard) insertLocked(key string, val []byte) {
	c := &cell{key: key, val: val, gen: sh.mu.gen}
	sh.mu.m[key] = c
	old, replaced := sh.mu.tree.ReplaceOrInsert(item{prefix(key), key, c})
	if replaced {
		sh.bytes.Add(int64(len(val) - len(old.c.val)))
		return
	}
	sh.keys.Add(1)
	sh.bytes.Add(int64(len(key) + len(val)))
}

// deleteLocked removes key and reports whether it existed.
func (sh *shard) deleteLocked(key []byte) bool {
	old, ok := sh.mu.m[string(key)]
	if !ok {
		return false
	}
	delete(sh.mu.m, string(key))
	sh.mu.tree.Delete(probe(string(key)))
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
		sh := &s.shards[i]
		trees[i] = sh.mu.tree.Clone()
		sh.mu.gen++ // the clone may share every cell made so far
	}
	return trees
}

func equal(a, b []byte) bool { return bytes.Equal(a, b) }
