// Package batchentry encodes the data of a raft entry that carries store
// batches (see store.Batch), as the members of a group propose them: a
// replica.Replica packs the batches it holds into one entry, and a group
// run by a multiraft.Host (package hostgroup) proposes one per entry.
//
// # Format, version 2
//
//	+---------+-----------+---------------+------------------------------------------+
//	| version | time      | count uvarint | count x (id uvarint, len uvarint, batch) |
//	+---------+-----------+---------------+------------------------------------------+
//	  1 byte (2) int64 LE
//
// time is the leader's clock when it proposed the entry, in unix
// nanoseconds: the one clock the state machine uses (with the entry's
// index, as a store.Stamp), so that every member applies the same. id
// names the caller waiting for the batch on the proposing member (how is
// the proposer's business). Version 1, without time, is still read (its
// time is 0).
package batchentry

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// version is the version byte of the entry data written here.
const version = 2

// AppendHeader starts the raft entry data of count batches proposed at
// time now (unix nanoseconds, the leader's clock).
func AppendHeader(dst []byte, now int64, count int) []byte {
	dst = append(dst, version)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(now))
	return binary.AppendUvarint(dst, uint64(count))
}

// Append adds one batch to the raft entry data being built in dst, after
// AppendHeader.
func Append(dst []byte, id uint64, batch []byte) []byte {
	dst = binary.AppendUvarint(dst, id)
	dst = binary.AppendUvarint(dst, uint64(len(batch)))
	return append(dst, batch...)
}

// ErrBadData means raft entry data could not be decoded.
var ErrBadData = errors.New("malformed entry data")

// Time returns the leader's time that raft entry data carries: 0 for
// version 1, which has none, or for data too short to hold one.
func Time(data []byte) int64 {
	if len(data) < 9 || data[0] != 2 {
		return 0
	}
	return int64(binary.LittleEndian.Uint64(data[1:]))
}

// Each calls fn for every batch in raft entry data, and returns the first
// error fn returns, or one wrapping ErrBadData.
func Each(data []byte, fn func(id uint64, batch []byte) error) error {
	head := 1 // version 1: the version byte
	switch {
	case len(data) >= 2 && data[0] == 1:
	case len(data) >= 10 && data[0] == 2:
		head = 9 // and the time
	default:
		return fmt.Errorf("%w: bad version", ErrBadData)
	}
	count, w := binary.Uvarint(data[head:])
	if w <= 0 {
		return fmt.Errorf("%w: bad count", ErrBadData)
	}
	p := data[head+w:]
	for i := uint64(0); i < count; i++ {
		id, w1 := binary.Uvarint(p)
		if w1 <= 0 {
			return fmt.Errorf("%w: bad id of batch %d", ErrBadData, i)
		}
		n, w2 := binary.Uvarint(p[w1:])
		if w2 <= 0 || n > uint64(len(p)-w1-w2) {
			return fmt.Errorf("%w: batch %d overruns the entry", ErrBadData, i)
		}
		b := p[w1+w2 : w1+w2+int(n)]
		p = p[w1+w2+int(n):]
		if err := fn(id, b); err != nil {
			return err
		}
	}
	if len(p) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrBadData, len(p))
	}
	return nil
}
