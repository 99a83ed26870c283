// Package multiraft runs many raft groups in one process, a node's: the
// Host. Its groups share the node's one log (wal.Shared), the node's
// transport (one connection per peer node carries every group's messages:
// see package transport) and a bounded number of goroutines, so that
// thousands of groups cost a few goroutines, one fsync per batch of writes
// to any of them, and, while idle, almost no CPU.
//
// # Goroutines
//
// A Host has a fixed number of them, whatever its groups: Config.Workers
// workers, one log writer, one snapshot writer and one ticker. A group with work (a message, a
// proposal, a tick, a finished write) is queued once, and a worker takes
// it: it steps its messages into its raft.RawNode, then, if raft has a
// Ready, hands the Ready's entries and hard state to the log writer and
// lets the group go. The writer saves every write waiting, of any group, in
// one wal.Shared.Save (one fsync), tells each group's raft storage, and
// queues the groups again; a worker then finishes each group's Ready: it
// sends its messages, applies its committed entries to the group's
// StateMachine and advances raft. A group is processed by one worker at a
// time, and its next Ready waits for the last one's write.
//
// # Quiescence
//
// An idle group costs nothing: once a leader has had nothing to do for
// Config.QuiesceTicks ticks, with every follower holding every entry and
// all of them committed, it stops ticking and tells its followers (a
// MsgHeartbeat whose Context is "quiesce", which the followers' hosts take
// and never give to raft), which stop ticking too: no heartbeats, no
// election timers. Any other message for the group, and any proposal,
// wakes it. Instead of each group's heartbeats, each host sends each peer
// node one message per tick (group 0), and a follower whose leader's node
// has not been heard from for an election timeout wakes the group, which
// then elects a new leader as raft does; a follower that missed the
// leader's quiesce message campaigns and so wakes the others. Quiescence
// only stops ticks: raft's safety never depends on it.
//
// # Reads
//
// ReadBarrier is raft's read index (ReadOnlySafe), at a leader or, asked of
// its leader, at a follower, then waits for the group to apply up to it
// on this node: the StateMachine then reflects every write acknowledged
// before the call. A quiesced group's leader wakes for it; its followers
// answer the heartbeat without waking.
//
// # Snapshots
//
// A group whose StateMachine is a Snapshotter takes snapshots, if the
// host has a Config.SnapDir; any other keeps its whole log, and a
// restarted host applies it from the first entry. A group snapshots once
// it has applied Config.SnapshotEntries entries since its last snapshot,
// and when the log asks it to: once the shared log is longer than
// Config.MaxLogBytes, the host asks the groups that keep its oldest
// segment (wal.Shared.Holders) to snapshot, as TiKV's raft-engine does. Snapshotter.Snapshot captures the state on the
// group's apply goroutine, as of the last entry applied; the host's one
// snapshot goroutine then writes it while the group goes on applying. A
// snapshot, once durable, is the one raft's storage holds: the group's
// raft storage and its entries in the log (wal.Shared.ReleaseTo) are
// compacted to it, and its older snapshot files are deleted.
//
// A member behind the leader's compacted log is sent the leader's
// snapshot file as a stream of its own (transport.Sender.SendSnapshot);
// its host makes it durable before raft takes it, then saves the restart
// of the group's log after it with the Ready's other writes, then
// restores the StateMachine from it, on the apply goroutine, never while a
// snapshot of the group is being written (a snapshot of the state before
// it that is not written yet never is). At start, a group restores from
// the newest of its snapshots that its log goes on from, and its commit
// index is at least the snapshot's.
//
// Files: each group's snapshots are in Config.SnapDir/<group id as 16
// lower-case hex digits>/, as package snap's files (<index>-<term>.snap,
// written to a .tmp file, fsynced, renamed and the directory fsynced),
// format version 2, the state as a stream (see package snap, "Streams")
// and the group's configuration in the header, and, once a change added a
// member with info or removed one, the group's roster in the section
// "multiraft.roster" (a file without it has an empty roster), version 1,
// in package snap's varints:
//
//	version     1 byte, 1
//	infos       count, then for each member, by ascending node id: node id, info length, info
//	removed     count, then each node id removed from the group, ascending
//
// A directory holds the newest snapshot durable and raft's, and any newer
// one a leader sent that raft did not take (it already held the entries):
// those go once a snapshot passes them.
//
// # Membership changes
//
// AddMember, RemoveMember and TransferLeadership change a group's members,
// named by node id, one change at a time, at its leader (see members.go):
// a new member joins as a learner, is caught up (by snapshot if the
// leader's log no longer holds what it lacks; every change asks for a
// snapshot, as raft takes none of a configuration without its receiver),
// then is promoted. The new node hosts the group with AddGroup given the
// group's first members, as every node does: its configuration is then
// raft's, from a snapshot's header or the first members, and the changes
// in the log after it, as they are applied. A change that adds a member
// carries the info AddMember was given (the member's addresses, say: the
// entry's format is in members.go), so that every member learns it as
// it applies the change (MemberInfo, and Config.OnMember as it happens),
// a node that joins from the snapshot it is sent, and a restarted one
// from its snapshot and log: the group's roster, which also records the
// node ids removed from the group. A removed id is never added back
// (ErrRemovedID: raft would take the new node for the old member, its
// vote included), and what it sends the group is dropped, but for the
// notice that it was removed (below). A node stops a group once it
// applies the change that removes it (one that joins applies those made
// before its own while not a member, and keeps the group), and releases
// its log of the group;
// one that missed its removal's commit learns of it when it campaigns: a
// member whose configuration is newer than its own and does not hold it
// answers so, and it stops. A node restarted after its removal is not to
// add the group again (AddGroup may refuse it, its entries gone). Where
// nodes are (the transport's addresses) is the caller's business, which
// the infos serve.
//
// # What a Host does not do yet
//
// Change several members at once (raft's joint configurations): changes
// are made one at a time.
package multiraft
