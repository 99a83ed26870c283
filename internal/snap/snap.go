// Package snap writes and reads snapshot files: the whole state of the store
// at one raft index, from which startup replays only the log after it.
//
// # Files
//
// Snapshots live in one directory, named <index>-<term>.snap with each number
// as 16 lower-case hex digits, so that names sort by index. A snapshot is
// written to <name>.tmp, fsynced, renamed to <name>, and the directory is
// fsynced: a crash leaves either no snapshot or a complete one, plus perhaps
// a .tmp file that the next start deletes.
//
// # Format, version 1
//
// A snapshot is a sequence of frames (see package frame: length, CRC-32C,
// type, payload, padding to 8 bytes). Integers are unsigned varints unless
// noted.
//
//	type 1, header: "FLNTSNP1" (8 bytes), version uint32 LE (1), index uint64 LE,
//	                term uint64 LE, voter count, voter ids
//	type 2, pairs:  zero or more of (key length, key, value length, value)
//	type 3, end:    pair count, total key and value bytes
//
// The header comes first and the end frame last; pairs frames hold at most
// about 256 KiB unless one pair is larger. Pairs are in strictly ascending
// byte order of their keys, within and across frames, so the file holds each
// key once (files of this version have always been written so; Load checks
// it, and loads pairs frames in parallel). A file without its end frame is
// truncated; one whose counts disagree with its pairs is damaged. Either
// stops Load with an *Error naming the file and offset.
package snap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/flintkv/flint/internal/vfs"
)

// Frame types of format version 1.
const (
	typeHeader = 1
	typePairs  = 2
	typeEnd    = 3
)

const (
	magic   = "FLNTSNP1"
	version = 1
	chunk   = 256 << 10 // target payload of a pairs frame
)

// Meta identifies the raft state a snapshot was taken at.
type Meta struct {
	Index, Term uint64
	Voters      []uint64
}

// Info describes a snapshot file in a directory.
type Info struct {
	Name        string // file name within the directory
	Index, Term uint64
}

// Error is damage found in a snapshot file.
type Error struct {
	File   string
	Offset int64
	Reason string
}

func (e *Error) Error() string {
	return fmt.Sprintf("snapshot %s at offset %d: %s", e.File, e.Offset, e.Reason)
}

func fileName(index, term uint64) string { return fmt.Sprintf("%016x-%016x.snap", index, term) }

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
		var in Info
		if n, err := fmt.Sscanf(name, "%016x-%016x.snap", &in.Index, &in.Term); n != 2 || err != nil || fileName(in.Index, in.Term) != name {
			return nil, &Error{File: path.Join(dir, name), Reason: "not a snapshot name (<index>-<term>.snap, 16 hex digits each); move the file out of the snapshot directory"}
		}
		in.Name = name
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

func headerPayload(m Meta) []byte {
	b := append([]byte(magic), 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(b[len(magic):], version)
	b = binary.LittleEndian.AppendUint64(b, m.Index)
	b = binary.LittleEndian.AppendUint64(b, m.Term)
	b = binary.AppendUvarint(b, uint64(len(m.Voters)))
	for _, v := range m.Voters {
		b = binary.AppendUvarint(b, v)
	}
	return b
}

func decodeHeader(p []byte) (Meta, error) {
	var m Meta
	if len(p) < len(magic)+20 || string(p[:len(magic)]) != magic {
		return m, errors.New("not a Flint snapshot (bad magic)")
	}
	if v := binary.LittleEndian.Uint32(p[len(magic):]); v != version {
		return m, fmt.Errorf("snapshot format version %d, this build reads version %d", v, version)
	}
	m.Index = binary.LittleEndian.Uint64(p[len(magic)+4:])
	m.Term = binary.LittleEndian.Uint64(p[len(magic)+12:])
	p = p[len(magic)+20:]
	n, w := binary.Uvarint(p)
	if w <= 0 || n > uint64(len(p)) {
		return m, errors.New("bad voter count")
	}
	p = p[w:]
	for range n {
		v, w := binary.Uvarint(p)
		if w <= 0 {
			return m, errors.New("bad voter id")
		}
		m.Voters, p = append(m.Voters, v), p[w:]
	}
	if len(p) != 0 {
		return m, errors.New("trailing bytes in header")
	}
	return m, nil
}
