package replica

import (
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/vfs"
)

// retryNoSpace is how often the append thread checks whether a write that
// found the disk full may be tried again; see waitForSpace.
const retryNoSpace = 200 * time.Millisecond

// maxSpaceWait is the longest the append thread waits between two tries of
// a write that found the disk full. It is a variable for tests.
var maxSpaceWait = 5 * time.Second

// minSpace is the least free space waitForSpace waits for, as a write of a
// hard state alone needs some too.
const minSpace = 4 << 10

// appendLoop is the append thread: it saves raft's append messages to the
// WAL, every waiting message in one write and one fsync, then tells raft.
// The raft loop keeps what waits to at most maxAppendBytes of entries (see
// handAppend), which so bounds each write.
func (r *Replica) appendLoop() {
	var msgs []raftpb.Message
	var ents []raftpb.Entry
	var resps []raftpb.Message
	saved, _, _ := r.storage.InitialState() // the hard state last written
	for {
		select {
		case m := <-r.appendc:
			msgs = append(msgs[:0], m)
		case <-r.dead:
			return
		}
		msgs = drain(r.appendc, msgs)
		ents, resps = ents[:0], resps[:0]
		var hs raftpb.HardState
		var restart *raftpb.Snapshot
		size := int64(0) // of the entries in msgs, as handAppend counted them
		for _, m := range msgs {
			size += entryBytes(m.Entries)
			if m.Snapshot != nil && !raft.IsEmptySnap(*m.Snapshot) {
				restart, ents = m.Snapshot, ents[:0] // it replaces the log
			}
			ents = append(ents, m.Entries...)
			if st := (raftpb.HardState{Term: m.Term, Vote: m.Vote, Commit: m.Commit}); !raft.IsEmptyHardState(st) {
				hs = st
			}
			resps = append(resps, m.Responses...)
		}
		if restart != nil {
			if !r.restartLog(*restart, hs) {
				return
			}
			// raft takes the snapshot as applied once this thread
			// responds, and commits no later entry before; the apply
			// thread, which owns the store, loads it first, in order.
			select {
			case r.applyc <- raftpb.Message{Type: raftpb.MsgStorageApply, Snapshot: restart}:
			case <-r.dead:
				return
			}
			if !raft.IsEmptyHardState(hs) {
				saved = hs
			}
		}
		// A write that changes only the commit index is not made: the
		// commit index is volatile state in raft, which a restart may find
		// older (the new term's first entry commits the rest again); a
		// later write saves it only if raft sends it again, with a change.
		// Responses need no write either: every earlier write is durable
		// already. So every write to the log is fsynced before the next one
		// is made, and damage to any but the last can be told from a torn
		// write (see package wal).
		if len(ents) > 0 || termOrVoteChanged(hs, saved) {
			if !r.save(ents, hs) || !r.sendEarly(ents) {
				return
			}
			if !raft.IsEmptyHardState(hs) {
				saved = hs
			}
		} else if !raft.IsEmptyHardState(hs) {
			r.storage.SetHardState(hs)
		}
		r.appending.Add(-int64(len(msgs))) // before respc: the loop then sees it
		r.appendBytes.Add(-size)
		select {
		case r.appendRoom <- struct{}{}:
		default: // a token waits already
		}
		select {
		case r.respc <- append([]raftpb.Message(nil), resps...):
		case <-r.dead:
			return
		}
		// Nothing written stays reachable from here: the slices are kept
		// for the next write, which may be shorter (and a snapshot may
		// have cut ents short).
		clear(msgs)
		clear(ents[:cap(ents)])
		clear(resps)
	}
}

// termOrVoteChanged reports whether hs, if not empty, changes the term or
// the vote of saved, which raft needs durable before it acts on them.
func termOrVoteChanged(hs, saved raftpb.HardState) bool {
	return !raft.IsEmptyHardState(hs) && (hs.Term != saved.Term || hs.Vote != saved.Vote)
}

// logNoSpace says what a full disk holds up: writes, or, before Open has
// returned, everything: recovery, or the new term's write (see Open). A
// follower also stops acknowledging its leader's entries (it writes them
// before it does); the other members go on without it, if they are a
// majority.
func (r *Replica) logNoSpace(err error) {
	if r.ready.Load() && !r.following() {
		r.opt.Logger.Error("the disk is full: refusing writes until space is freed", "dir", r.opt.Dir, "err", err)
		return
	}
	if r.ready.Load() {
		r.opt.Logger.Error("the disk is full: this member stops acknowledging its leader's entries until space is freed; "+
			"the others go on without it if they are a majority", "dir", r.opt.Dir, "leader", r.lead.Load(), "err", err)
		return
	}
	r.opt.Logger.Error("the disk is full: the node cannot start serving until space is freed, "+
		"as it must write to its data directory first", "dir", r.opt.Dir, "err", err)
}

// save writes to the WAL, durably, and to raft's storage. A full disk is
// retried until space is freed, with writes refused meanwhile; any other
// failure stops the replica. It reports whether the replica may go on.
func (r *Replica) save(ents []raftpb.Entry, hs raftpb.HardState) bool {
	// Only a full disk leaves the log as it was (its permanent failures
	// never look like one: see wal.Save), so only that is tried again.
	err := vfs.RetryNoSpace(func() error { return r.wal.Save(ents, hs) }, r.untilSpace(max(logBytes(ents), minSpace)))
	if err != nil {
		if !vfs.IsNoSpace(err) { // else the replica stopped while waiting
			r.fail(err)
		}
		return false
	}
	if r.noSpace.Swap(false) {
		what := "accepting writes"
		switch {
		case !r.ready.Load():
			what = "starting"
		case r.following():
			what = "catching up with the leader"
		}
		r.opt.Logger.Warn("disk space is available again: "+what, "dir", r.opt.Dir)
	}
	if err := r.storage.Append(ents); err != nil {
		r.fail(errorf("raft storage: %w", err))
		return false
	}
	if !raft.IsEmptyHardState(hs) {
		r.storage.SetHardState(hs)
	}
	return true
}

// following reports whether another member leads, as far as this one
// knows.
func (r *Replica) following() bool {
	lead := r.lead.Load()
	return lead != 0 && lead != r.id
}

// untilSpace returns what a write of about need bytes that found the disk
// full (err) calls before it is tried again: it says so, once a full disk
// begins (noSpace; the first write that succeeds after it says it is over,
// see save), and waits for space (see waitForSpace). It reports whether to
// try again, which it does unless the replica stops.
func (r *Replica) untilSpace(need int64) func(err error) bool {
	var wait spaceWait
	return func(err error) bool {
		if !r.noSpace.Swap(true) {
			r.logNoSpace(err)
		}
		return r.waitForSpace(need, &wait)
	}
}

// spaceWait is what waitForSpace keeps between the tries of one write.
type spaceWait struct {
	fit    bool // the filesystem did not say the space was lacking before the last try
	misses int  // tries that failed even so
}

// waitForSpace waits before the next try of a write of about need bytes
// that found the disk full, so that it is not made and undone again and
// again. While the filesystem says it lacks the space, it waits for that,
// checking every retryNoSpace, but no longer than maxSpaceWait: statfs may
// count differently from what the write can use. Otherwise (the space is
// there by its count, as under a disk quota, or it cannot tell) it waits a
// time that doubles with each such try that failed, from retryNoSpace up
// to maxSpaceWait. It reports whether the replica may go on.
func (r *Replica) waitForSpace(need int64, w *spaceWait) bool {
	if w.fit {
		w.misses++
	}
	backoff := min(retryNoSpace<<min(w.misses, 8), maxSpaceWait)
	for waited := time.Duration(0); ; {
		select {
		case <-time.After(retryNoSpace):
			waited += retryNoSpace
		case <-r.dead:
			return false
		}
		avail, known := vfs.Available(r.opt.FS, r.walDir())
		lacking := known && avail < need
		if lacking && waited < maxSpaceWait || !lacking && waited < backoff {
			continue
		}
		w.fit = !lacking
		return true
	}
}

// logBytes is about what ents take in the log: their data, and a little
// for each record's framing.
func logBytes(ents []raftpb.Entry) int64 {
	n := int64(0)
	for _, e := range ents {
		n += int64(len(e.Data)) + 64
	}
	return n
}

// drain appends to msgs every message waiting in c.
func drain(c chan raftpb.Message, msgs []raftpb.Message) []raftpb.Message {
	for {
		select {
		case m := <-c:
			msgs = append(msgs, m)
		default:
			return msgs
		}
	}
}
