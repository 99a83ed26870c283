// Package wal is Flint's write-ahead log: the raft log and raft's hard state
// (term, vote, commit index), in checksummed segment files: one group's
// (WAL), or those of all the groups of a node, in one shared log (Shared).
//
// # Files
//
// A log lives in one directory. Its segments are named
//
//	<seq>-<first>.wal
//
// with seq, the segment's sequence number, and first, the index of the
// first entry it was started for (the one that followed the last entry of
// the log, unless raft was rewriting the log's tail), each as 16
// lower-case hex digits: the entries of earlier segments that are still
// part of the log all come before first, but the segment itself may
// rewrite smaller indexes when raft truncates the log. (One exception: if
// a power loss took the rewrite a segment was started for, the log goes on
// from the entries it was to replace, in earlier segments, and the
// segment's entries follow them; see ReleaseTo.) Sequence numbers are
// consecutive: a gap means a segment is missing. A segment is appended to
// until it reaches Options.SegmentSize, or until a write would take it past
// 32 GiB (see Reading), then the next one is started.
// Segments whose entries are all covered by a snapshot are deleted by
// ReleaseTo. With Options.Preallocate, a segment may start as a file of
// zeros (a spare, prepared as spare.tmp and renamed; see spare.go) that its
// frames are written over: zeros after the last frame are the segment's
// clean end. spare.tmp is never part of the log.
//
// # Format, version 3
//
// A segment is a sequence of frames (see package frame: length, CRC-32C,
// type, payload, padding to 8 bytes). Integers in payloads are unsigned
// varints unless noted.
//
//	type 1, header:     "FLNTWAL1" (8 bytes), version uint32 LE (3), seq uint64 LE, first uint64 LE
//	type 2, entry:      term, index, entry type (1 byte: raftpb.EntryType), data (the rest)
//	type 3, hard state: term, vote, commit
//	type 4, seal:       from uint64 LE, cover uint32 LE
//	type 5, restart:    index
//
// A restart record (written by Restart, for a member that installs its
// leader's snapshot at index) ends the log before it: every entry before
// it in the file order stops being part of the log, which goes on at
// index+1, and Open deletes the segments before the segment that holds
// it. Open needs a snapshot at index or later. Version 2 is version 3
// without restart records, and is still read; new segments are version 3.
//
// Every write to a segment (one call to Append, or a segment's start) ends
// with a seal. from is the offset of the segment's first byte that was not
// known to be durable when the write was made: the end of the last write
// fsynced, or 0. cover is the CRC-32C of the segment's seq and first, as
// uint64 LE each, followed by the segment's bytes from from to the seal's
// own offset. Replay skips seals; they tell a torn write from damage (see
// below). Version 1, without seals, is not read: no release wrote it.
//
// The header is the first frame of every segment and appears only there. The
// second frame of every segment is the hard state current when it was
// started, so that deleting older segments never loses it. Entries may
// repeat an index: a later entry with index i replaces the entry i and every
// entry after it, as raft's log truncation does. Within a segment and across
// segments, an entry's index is at most one more than the last index before
// it, with one exception: with NoSync, a segment started when the log ended
// before the snapshot that Open was given (its tail taken by a power loss)
// starts at the snapshot's index plus one, and entries before it may end
// earlier. Open accepts such a gap only before entries that its snapshot
// holds; without NoSync, a log that ends before the snapshot is damage.
//
// # The shared log, format version 4
//
// A shared log (OpenShared) holds the logs of many raft groups, one node's,
// in one directory, so that a write of entries to many groups is one write
// and one fsync. Its segments are named as above with first always 0, and
// are version 4 (a log of one group never reads one, nor a shared log a
// version 2 or 3 segment). Their frames are the header (version 4), seals,
// and records that carry their group's id first:
//
//	type 6, group entry:      group, term, index, entry type (1 byte), data (the rest)
//	type 7, group hard state: group, term, vote, commit
//	type 8, group restart:    group, index
//
// Each group's records follow the rules above for its own log: its
// entries may rewrite its tail, and a restart record ends its log before
// it (the group installed a snapshot at index from its leader). Records of
// different groups interleave freely. A segment starts with its header and
// then the hard state of every group that has one, in the order of their
// ids. Save writes every group's records in one write, sealed as above, and
// fsyncs once; there is no NoSync.
//
// A segment is deleted once every group with entries in it since the
// group's last restart has a durable snapshot at or past the last of them
// (ReleaseTo, per group), and every older segment is deleted; Holders
// names the groups that keep the oldest segment, for the node to ask them
// to snapshot, as TiKV's raft-engine does when its log grows. A group that
// a node no longer hosts keeps its segments until it releases them.
//
// Open reads every segment as above (torn tails, seals and damage alike),
// keeping in memory each group's index (as below, one per group) and
// hard state, but not its entries; Group then checks a group's log against
// its snapshot, as Open does for a log of one group, and gives its raft
// storage the entries after it to read.
//
// # Durability and recovery
//
// Save writes a group of frames with one write and, unless Options.NoSync,
// makes them durable with one fsync before it returns. A power loss may tear
// the writes not yet fsynced in any way: a disk may write their sectors in
// any order, so a torn write can leave whole frames after lost ones. At
// Open, a frame that cannot be read in the last segment is a torn write
// unless a seal after it verifies and its from is past the damage: that
// seal ends a write made once the damaged bytes were durable. A torn write
// is truncated at the first frame that cannot be read (zeros after it, in
// a preallocated segment, are no loss) and the loss is logged. Any other
// damage (a bad frame with such a seal after it, damage in an earlier
// segment, a missing segment, a gap in entries the snapshot lacks, which
// is also what a segment before the last leaves when it is cut exactly at
// the end of a frame, since the next segment's first index says where it
// ended) stops Open with an *Error that names the file and offset; but
// segments left before a gap whose every entry the snapshot holds are
// deleted, with a warning, as leftovers of a release that failed. Nothing
// is skipped silently, except what Open cannot see: a missing last
// segment, or a last segment cut exactly at the end of a frame, reads as a
// log that ends there. Damage to the writes made since the last fsync but
// one (the last write, and any Append that the last fsync made durable
// with it) cannot be told from a torn write, and is truncated as one: a
// power loss during that fsync can leave the same bytes. With NoSync, only
// the last segment's start, and what it held when Open last reopened it,
// are known durable, so damage anywhere after that is taken for a torn
// write.
//
// An fsync that fails leaves the file's state unknown, so the WAL refuses all
// later writes; the node must stop. (One exception, at Open: a torn
// segment start that a full disk kept from being written and fsynced again
// is written again whole, see Options.WaitForSpace.) Linux may then keep
// the data it failed to write in the page cache as clean pages (ext4 does),
// which reads return but no later fsync writes. So Open first fsyncs the last segment, the only one that can
// hold writes not yet durable (a process killed before its fsync leaves
// them dirty, and this makes them durable), then evicts its clean pages
// (vfs.File.DropCache) and reads what the disk holds: records a failed
// fsync did not write read as a torn write, and are not replayed only to
// vanish at the next power loss from under the records added after them.
// A write that finds the disk full is undone (the segment is truncated
// back) and may be retried once space is freed.
//
// # Reading
//
// While the log is open, Entries reads its entries back by index, and
// Term, FirstIndex and LastIndex answer from memory, as raft's Storage
// needs (see package raftlog). They may be called from any goroutine,
// concurrently with Save and ReleaseTo. An index in memory, built by
// Open's replay and kept by Append, holds the offset of each entry of the
// log in its segment and the term of each run of entries of one term. A
// rewrite of the log's tail replaces in the index, as in the log, the
// entries it truncates; ReleaseTo drops those of the segments it deletes
// before it deletes them. An offset takes 4 bytes: frames are 8-byte
// aligned, so it counts 8-byte units, which reach 32 GiB, past which no
// segment grows (a write of more than 16 GiB is refused).
//
// A read returns the entries as the log held them at some instant during
// the call: never one that a rewrite had replaced before the call began.
// While the log is open, no byte of an entry that the index holds is
// written again (a rewrite appends, and only Open truncates a torn tail),
// so a reader locates its entries under the lock and reads them without
// it, with pread (vfs.File.ReadAt) on a handle of its own, into new
// memory: usually one read per segment for the entries that maxSize lets
// through, and the other frames between them. The entries and their data
// (which share that memory) are the caller's to keep, and never change.
// Segments are not mapped for reads: a mapping holds a deleted segment's
// disk space until the process exits (see vfs.Map). Each entry read is
// checked, its frame's CRC and its index; damage returns an *Error. An
// entry before FirstIndex reads as ErrReleased, as does one whose segment
// ReleaseTo deleted during the read; one after LastIndex as
// ErrUnavailable.
package wal
