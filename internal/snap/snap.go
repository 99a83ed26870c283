// Package snap writes, reads, checks and installs snapshot files: the whole
// state of the state machine at one raft index (its pairs, the group's
// configuration, and named sections of other state), from which startup
// replays only the log after it, and which a leader sends to a follower too
// far behind for the log.
//
// # Files
//
// Snapshots live in one directory, named <index>-<term>.snap with each number
// as 16 lower-case hex digits, so that names sort by index. A snapshot is
// written to <name>.tmp, fsynced, renamed to <name>, and the directory is
// fsynced: a crash leaves either no snapshot or a complete one, plus perhaps
// a .tmp file that the next start deletes. Install does the same with a
// snapshot received from a peer, which it checks before the rename.
//
// Write, Install and Prune of one directory must not run at once: Prune
// deletes every .tmp file, including one being written. Load, Verify,
// List and OpenFile may run at any time: a file, once renamed into place,
// never changes (a new one of the same name replaces it), and one that is
// open stays readable after Prune deletes it.
//
// # Format, version 2
//
// A snapshot is a sequence of frames (see package frame: length, CRC-32C,
// type, payload, padding to 8 bytes). Integers are unsigned varints unless
// noted; a list of ids is a count, then each id. The payloads, byte by byte:
//
//	type 1, header:
//	   0  magic              8 bytes, "FLNTSNP1"
//	   8  version            uint32 LE, 2
//	  12  index              uint64 LE
//	  20  term               uint64 LE
//	  28  voters             list of ids   (raftpb.ConfState.Voters)
//	      learners           list of ids   (Learners)
//	      outgoing voters    list of ids   (VotersOutgoing: a joint configuration's old voters)
//	      next learners      list of ids   (LearnersNext)
//	      auto-leave         1 byte, 0 or 1 (AutoLeave)
//	      section count      0 to MaxSections
//	type 4, section:
//	      name length        1 to MaxSectionName
//	      name
//	      data length        of the section's whole data
//	      data               its first bytes, at most 256 KiB
//	type 5, section data:
//	      data               the next bytes of the data of the section before, at most 256 KiB
//	type 2, pairs:
//	      zero or more of (key length, key, value length, value)
//	type 3, end:
//	      pair count
//	      total key and value bytes
//
// The header comes first. Then, for each of the sections it counts, in the
// order written, a section frame followed by as many section data frames
// as its data needs (none if it fits in the section frame); section names
// are unique. Then the pairs frames, and the end frame last. Pairs frames
// hold at most about 256 KiB unless one pair is larger. Pairs are in
// strictly ascending byte order of their keys, within and across frames,
// so the file holds each key once (Load checks it, and loads pairs frames
// in parallel).
//
// A file without its end frame is truncated; one whose counts disagree with
// what it holds (pairs and their bytes, sections, a section's bytes) is
// damaged. Either stops Load, Verify and Install with an *Error naming the
// file and offset. What a damaged file can make a reader allocate is
// bounded by the file's size: an id list's count by the header's bytes, a
// section's data length by the bytes left in the file.
//
// # Streams
//
// A state that is not made of pairs, but written as a stream of bytes
// (WriteStream, ReadStream), is a file of this format whose pairs are the
// stream's chunks, in order: chunk k, at most 64 KiB of the stream, under
// the key k as 8 bytes big-endian, from 0. Such a file is an ordinary
// snapshot to everything else here (Verify, Install, OpenFile, Prune).
//
// A snapshot may itself be such a stream: WriteTo writes one to an
// io.Writer, and ReadFrom reads it back from an io.Reader one frame at a
// time, checked as Verify checks a file, but for the file's size, which a
// stream does not know (so its end is its reader's io.EOF).
//
// # Format, version 1
//
// Version 1 files are still read; none is written. They are version 2
// files without section frames whose header stops after the voters:
//
//	type 1, header: "FLNTSNP1", version uint32 LE (1), index uint64 LE,
//	                term uint64 LE, voters (list of ids)
//
// Their voters are Meta.Conf.Voters; they hold no sections.
package snap

import (
	"fmt"
	"path"
	"strings"

	"github.com/flintkv/flint/internal/vfs"
	"go.etcd.io/raft/v3/raftpb"
)

// Frame types.
const (
	typeHeader      = 1
	typePairs       = 2
	typeEnd         = 3
	typeSection     = 4 // version 2
	typeSectionData = 5 // version 2
)

const (
	magic   = "FLNTSNP1"
	version = 2         // written; version 1 is read too
	chunk   = 256 << 10 // target payload of a pairs or section frame
)

// Limits on sections, which Write refuses to exceed and Load takes a file
// that exceeds for damaged.
const (
	MaxSections    = 64 // in one snapshot
	MaxSectionName = 64 // bytes
)

// Meta is what a snapshot holds besides its pairs: the raft state it was
// taken at, and the sections.
type Meta struct {
	Index, Term uint64
	// Conf is the group's configuration at Index, joint or not.
	Conf raftpb.ConfState
	// Sections are state the state machine keeps besides the pairs (the
	// group's members and their addresses, client sessions), in the order
	// written. Their names are unique. The Data that Load and Verify return
	// is the caller's, a copy of the file's.
	Sections []Section
}

// Section is a named piece of the state machine's state. Its data may be
// of any size that the caller can hold in memory: it is written in frames
// of at most 256 KiB.
type Section struct {
	Name string // 1 to MaxSectionName bytes
	Data []byte
}

// Info describes a snapshot file in a directory.
type Info struct {
	Name        string // file name within the directory
	Index, Term uint64
}

// Error is damage found in a snapshot file, or a file that is not the
// snapshot it should be.
type Error struct {
	File   string
	Offset int64
	Reason string
}

func (e *Error) Error() string {
	return fmt.Sprintf("snapshot %s at offset %d: %s", e.File, e.Offset, e.Reason)
}

func fileName(index, term uint64) string { return fmt.Sprintf("%016x-%016x.snap", index, term) }

// parseName returns the index and term that a snapshot's file name holds,
// and whether it is one.
func parseName(name string) (Info, bool) {
	in := Info{Name: name}
	n, err := fmt.Sscanf(name, "%016x-%016x.snap", &in.Index, &in.Term)
	return in, n == 2 && err == nil && fileName(in.Index, in.Term) == name
}

// List returns the snapshots in dir, oldest first. Files that are not
// snapshots are ignored; a snapshot name that does not parse is an error.
func List(fs vfs.FS, dir string) ([]Info, error) {
	names, err := fs.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("snap: %w", err)
	}
	var infos []Info
	for _, name := range names {
		if !strings.HasSuffix(name, ".snap") {
			continue
		}
		in, ok := parseName(name)
		if !ok {
			return nil, &Error{File: path.Join(dir, name), Reason: "not a snapshot name (<index>-<term>.snap, 16 hex digits each); move the file out of the snapshot directory"}
		}
		infos = append(infos, in)
	}
	return infos, nil
}

// Prune deletes all but the newest keep snapshots in dir, and every
// leftover .tmp file.
func Prune(fs vfs.FS, dir string, keep int) error {
	names, err := fs.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("snap: %w", err)
	}
	infos, err := List(fs, dir)
	if err != nil {
		return err
	}
	var gone []string
	for _, name := range names {
		if strings.HasSuffix(name, ".tmp") {
			gone = append(gone, name)
		}
	}
	for i := 0; i < len(infos)-keep; i++ {
		gone = append(gone, infos[i].Name)
	}
	for _, name := range gone {
		if err := fs.Remove(path.Join(dir, name)); err != nil {
			return fmt.Errorf("snap: %w", err)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	return fs.SyncDir(dir)
}
