package replica

import (
	"errors"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/vfs"
	"github.com/flintkv/flint/internal/wal"
)

// retryNoSpace is how often the append thread retries a write that found the
// disk full.
const retryNoSpace = 200 * time.Millisecond

// appendLoop is the append thread: it saves raft's append messages to the
// WAL, every waiting message in one write and one fsync, then tells raft.
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
		for _, m := range msgs {
			if m.Snapshot != nil && !raft.IsEmptySnap(*m.Snapshot) {
				r.fail(errorf("received a snapshot from a leader; this build has one voter"))
				return
			}
			ents = append(ents, m.Entries...)
			if st := (raftpb.HardState{Term: m.Term, Vote: m.Vote, Commit: m.Commit}); !raft.IsEmptyHardState(st) {
				hs = st
			}
			resps = append(resps, m.Responses...)
		}
		// A write that changes only the commit index is not made: the
		// commit index is volatile state in raft, which a restart may find
		// older (the new term's first entry commits the rest again); a
		// later write saves it only if raft sends it again, with a change.
		// Responses need no write either: every
		// earlier write is durable already. So every write to the log is
		// fsynced before the next one is made, and damage to any but the
		// last can be told from a torn write (see package wal).
		if len(ents) > 0 || termOrVoteChanged(hs, saved) {
			if !r.save(ents, hs) {
				return
			}
			if !raft.IsEmptyHardState(hs) {
				saved = hs
			}
		} else if !raft.IsEmptyHardState(hs) {
			r.storage.SetHardState(hs)
		}
		select {
		case r.respc <- append([]raftpb.Message(nil), resps...):
		case <-r.dead:
			return
		}
		clear(msgs)
	}
}

// termOrVoteChanged reports whether hs, if not empty, changes the term or
// the vote of saved, which raft needs durable before it acts on them.
func termOrVoteChanged(hs, saved raftpb.HardState) bool {
	return !raft.IsEmptyHardState(hs) && (hs.Term != saved.Term || hs.Vote != saved.Vote)
}

// logNoSpace says what a full disk holds up: writes, or, before Open has
// returned, everything.
func (r *Replica) logNoSpace(err error) {
	if r.ready.Load() {
		r.opt.Logger.Error("the disk is full: refusing writes until space is freed", "dir", r.opt.Dir, "err", err)
		return
	}
	r.opt.Logger.Error("the disk is full: the node cannot start serving until space is freed, "+
		"as it must first write its new term to the log", "dir", r.opt.Dir, "err", err)
}

// save writes to the WAL, durably, and to raft's storage. A full disk is
// retried until space is freed, with writes refused meanwhile; any other
// failure stops the replica. It reports whether the replica may go on.
func (r *Replica) save(ents []raftpb.Entry, hs raftpb.HardState) bool {
	for {
		err := r.wal.Save(ents, hs)
		if err == nil {
			break
		}
		if errors.Is(err, wal.ErrFailed) || !vfs.IsNoSpace(err) {
			r.fail(err)
			return false
		}
		if !r.noSpace.Swap(true) {
			r.logNoSpace(err)
		}
		if !r.waitForSpace(logBytes(ents)) {
			return false
		}
	}
	if r.noSpace.Swap(false) {
		r.opt.Logger.Warn("disk space is available again: accepting writes", "dir", r.opt.Dir)
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

// waitForSpace waits until the disk has room for need bytes more, if it
// can tell (else for retryNoSpace), so that a write that found the disk
// full is not made and undone again and again meanwhile. It reports
// whether the replica may go on.
func (r *Replica) waitForSpace(need int64) bool {
	for {
		select {
		case <-time.After(retryNoSpace):
		case <-r.dead:
			return false
		}
		if avail, ok := vfs.Available(r.opt.FS, r.walDir()); !ok || avail >= need {
			return true
		}
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
