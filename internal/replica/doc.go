// Package replica is the raft glue: it runs one raft group (go.etcd.io/raft/v3)
// whose log is Flint's write-ahead log and whose state machine is a
// store.Store. A single-node Flint is one group with one voter.
//
// # Threads
//
// Raft runs with AsyncStorageWrites, so that no disk write holds up the raft
// state machine, in three goroutines:
//
//   - the raft loop owns the RawNode. It turns waiting writes into proposals
//     and waiting reads into read-index requests, and hands raft's storage
//     messages to the two threads below, in order. While the append thread
//     has any message in hand, it holds the writes that arrive, and
//     proposes them as one entry once it has none, or sooner once they reach
//     maxEntryBytes (see loop.proposeHeld): so the writes that arrive during
//     an fsync share the next one (group commit).
//   - the append thread saves log entries and hard state to the WAL. It takes
//     every append message waiting when it starts a write, with one write
//     and one fsync for them all. The raft loop hands it at most
//     maxAppendBytes of entries it has not written, and waits beyond that
//     (loop.handAppend), so that what a member holds before writing it is
//     bounded whatever it is sent.
//     Messages that only advance the commit index are not written, even
//     when raft waits to hear back. The log's commit index may then lag far
//     behind (raft sends a hard state only when it changes, so a later
//     write of entries need not carry it), which costs nothing durable: a
//     restart holds the entries after it as uncommitted, and its first
//     entry, which Open waits for, commits them again.
//   - the apply thread applies committed entries to the store, completes the
//     writes waiting on them, and starts background snapshots.
//
// raft's Storage is a raftlog.Storage: it serves recent entries from a
// bounded cache and older ones from the log on disk, back to the older of
// the two kept snapshots, so that a follower behind the newest snapshot
// but not the older one catches up from the log; only one further behind
// needs a snapshot. A leader has at most maxInflightBytes of entries in
// flight to each follower, which it reads from the log in the raft loop
// (raft reads its Storage itself, synchronously).
//
// # Writes
//
// Apply blocks until its batch is committed (durable in the WAL) and applied;
// the apply thread calls the caller's callback after each entry of the batch
// takes effect, which is where a connection looks up the keys of the reads
// pipelined among its writes (only that: it replies once Apply returns). The
// raft loop packs the batches it holds into one raft entry, in the format of
// package batchentry: the leader's clock when it proposed the entry, then
// each batch with an id. The time is the one clock the state machine uses
// (with the entry's index, as a store.Stamp), for client sessions' expiry
// and keys' deadlines, so that every replica applies the same; a store
// keeps it monotonic, whatever a new leader's clock says. The id names the
// waiting caller within this process run: the proposing member's id in its
// high 32 bits, and a counter that starts at a random value at every start
// in its low ones, so that entries proposed before a restart, or by another
// member, never complete a new caller. Entries with no data are raft's own
// (a new leader's empty entry).
//
// Every Apply ends, and says whether its write took effect (the classes in
// errors.go): applied; refused before it was proposed (not leader, no
// space, too large, or its caller's context ended while the raft loop held
// it); or of unknown outcome, when the replica stops, this member loses its
// leadership while the entry is in the log, or the caller's context ends
// once it is proposed. A caller that gave up is never called back.
//
// # Reads
//
// ReadBarrier is raft's read index: the raft loop asks raft for the commit
// index once for all the reads waiting when it runs, and the reads proceed
// once the store has applied up to it. With one voter raft answers at once;
// with more it confirms leadership with a heartbeat round first, and a
// follower's request goes to the leader. Requests unanswered when the
// leader changes, or for reissueTicks, are made again; a request's context
// names its member, as the leader keys its own and its followers' together.
// With no leader, reads wait until one is elected or their context ends. No
// request is made before this node, as leader, has committed an entry of its
// own term: after a restart the commit index raft starts from can lag behind
// writes that were acknowledged before the crash.
//
// # Startup
//
// Open loads the newest snapshot into a fresh store, then reads the log after
// it: entries up to the last persisted commit index are applied as they are
// read, later ones are handed to raft, which commits them once this node leads
// again. Replay stops applying at the first configuration change, which only
// raft may apply (RawNode.ApplyConfChange): it and the entries after it are
// left to raft. A fresh directory is bootstrapped with an empty snapshot at
// index 1 whose configuration is Options.Voters (this member alone by
// default), or, for a member that joins a group, an empty one at index 0
// that its leader's snapshot replaces.
//
// # Groups of several members
//
// The raft loop sends raft's messages for other members through
// Options.Peers, and the replica receives theirs as the group's
// transport.Handler (peers.go). A member too far behind is sent the
// leader's newest snapshot file and installs it (install.go); membership
// changes go through raft's configuration changes (members.go). Each
// member registers its data directory's incarnation with the group, which
// then refuses a member whose directory was wiped and made anew under its
// old id (incarnation.go).
//
// # Directory layout
//
//	<dir>/snap/   snapshot files (package snap); the two newest are kept
//	<dir>/wal/    log segments (package wal), deleted once the older kept
//	              snapshot covers them
//
// Keeping two snapshots, and the log after the older one, lets an operator
// whose newest snapshot is damaged move it aside and start from the older one.
package replica
