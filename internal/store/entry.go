package store

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Op names a mutating command in an entry.
type Op byte

// The operations an entry can carry. Their numbers are part of the on-disk
// format: never reuse or renumber one.
const (
	OpSet    Op = 1 // args: key, value; flags: SetNX, SetXX, SetGet
	OpMSet   Op = 2 // args: key, value, key, value, ...
	OpMSetNX Op = 3 // args: key, value, ...; writes all or none
	OpDel    Op = 4 // args: key, ...
	OpIncrBy Op = 5 // args: key, delta (8 bytes, big-endian two's complement)
	OpAppend Op = 6 // args: key, suffix
	OpCAS    Op = 7 // args: key, expected, new
	OpFlush  Op = 8 // no args; removes every key, and leaves the session table alone

	// Session ops (see the package doc). Their 8-byte arguments are unsigned
	// big-endian integers (see Uint64Arg). They need a stamp: see
	// ApplyBatchAt.
	OpSessionOpen  Op = 9  // no args; opens a session, whose client id is the result's Int
	OpSeq          Op = 10 // args: client id, seq, lowest unacknowledged seq (8 bytes each); wraps the next entry
	OpSessionClose Op = 11 // args: client id (8 bytes)

	// Transaction ops (see tx.go).
	OpExec Op = 20 // args: watch count n (8 bytes), n x (key, position (8 bytes)), then entries; one transaction
	OpRead Op = 21 // args: key, ...; reads them, inside an OpExec

	// Expiry ops (see expiry.go). A deadline argument is 8 bytes, a
	// big-endian int64 of milliseconds (see DeadlineArg).
	OpSetExpire Op = 30 // args: key, value, deadline; flags: OpSet's, ExpireRelative
	OpExpire    Op = 31 // args: key, deadline; flags: ExpireNX, ExpireXX, ExpireGT, ExpireLT, ExpireRelative, ExpireGet
	OpPersist   Op = 32 // args: key; flags: ExpireGet
	OpExpireDue Op = 33 // args: key, ...; removes those whose deadline the clock has passed
	OpDeadline  Op = 34 // args: key; reads its deadline, inside an OpExec (TTL and the like)

	// Ops 40 to 69 are the keyspace and string ops of keyspace.go.
	// Slot-move ops, 70 to 76 and 103 (fenced): see slotmove.go.
)

// session reports whether op is a session op, which works on the session
// table rather than on keys, and which an OpSeq cannot wrap.
func (op Op) session() bool {
	switch op {
	case OpSessionOpen, OpSeq, OpSessionClose:
		return true
	}
	return false
}

// Flags modify OpSet.
const (
	SetNX  byte = 1 << 0 // write only if the key does not exist
	SetXX  byte = 1 << 1 // write only if the key exists
	SetGet byte = 1 << 2 // return the old value
	// SetKeepTTL keeps the key's deadline; without it OpSet clears it.
	SetKeepTTL byte = 1 << 3
)

// EntryVersion is the version of the entry encoding written by AppendEntry.
const EntryVersion = 1

// ErrBadEntry means an entry could not be decoded: it is corrupt or from an
// unknown version. It is never caused by client input, which the server
// validates before encoding.
var ErrBadEntry = errors.New("store: malformed entry")

// An entry is the encoded form of one mutating command: what the server
// hands to the state machine now, and what the raft log will carry later.
//
//	+---------+----+-------+---------------+-----------------------------+
//	| version | op | flags | nargs uvarint | nargs x (len uvarint, data) |
//	+---------+----+-------+---------------+-----------------------------+
//	  1 byte   1 B   1 B
//
// version is EntryVersion. Lengths are unsigned varints as in
// encoding/binary. Nothing follows the last argument.

// AppendEntry encodes a command at the end of dst.
func AppendEntry(dst []byte, op Op, flags byte, args ...[]byte) []byte {
	dst = append(dst, EntryVersion, byte(op), flags)
	dst = binary.AppendUvarint(dst, uint64(len(args)))
	for _, a := range args {
		dst = binary.AppendUvarint(dst, uint64(len(a)))
		dst = append(dst, a...)
	}
	return dst
}

// DeltaArg encodes an OpIncrBy delta.
func DeltaArg(delta int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(delta)) }

// Uint64Arg encodes a client id or a sequence number, an argument of
// OpSeq or OpSessionClose.
func Uint64Arg(x uint64) []byte { return binary.BigEndian.AppendUint64(nil, x) }

// entry is a decoded entry. Args alias the encoded bytes.
type entry struct {
	op    Op
	flags byte
	args  [][]byte
}

// decodeEntry decodes b. The args slice is reused from scratch.
func decodeEntry(b []byte, scratch [][]byte) (entry, error) {
	if len(b) < 4 || b[0] != EntryVersion {
		return entry{}, fmt.Errorf("%w: bad header", ErrBadEntry)
	}
	e := entry{op: Op(b[1]), flags: b[2], args: scratch[:0]}
	n, w := binary.Uvarint(b[3:])
	if w <= 0 || n > uint64(len(b)) {
		return entry{}, fmt.Errorf("%w: bad argument count", ErrBadEntry)
	}
	b = b[3+w:]
	for i := uint64(0); i < n; i++ {
		l, w := binary.Uvarint(b)
		if w <= 0 || l > uint64(len(b)-w) {
			return entry{}, fmt.Errorf("%w: argument %d overruns the entry", ErrBadEntry, i)
		}
		e.args = append(e.args, b[w:w+int(l):w+int(l)])
		b = b[w+int(l):]
	}
	if len(b) != 0 {
		return entry{}, fmt.Errorf("%w: %d trailing bytes", ErrBadEntry, len(b))
	}
	return e, e.check()
}

// keys returns the entry's keys: every stride-th of the returned slice,
// from its first.
func (e entry) keys() (keys [][]byte, stride int) {
	switch e.op {
	case OpMSet, OpMSetNX:
		return e.args, 2
	case OpDel, OpRead, OpExpireDue:
		return e.args, 1
	case OpFlush, OpSessionOpen, OpSeq, OpSessionClose, OpExec:
		return nil, 1
	}
	if keyspaceOp(e.op) {
		return e.keyspaceKeys(), 1
	}
	if e.op.slotOp() {
		return nil, 1
	}
	return e.args[:1], 1
}

// check verifies that the entry has the arguments its op needs.
func (e entry) check() error {
	n := len(e.args)
	ok := false
	switch e.op {
	case OpSet, OpAppend:
		ok = n == 2
	case OpMSet, OpMSetNX:
		ok = n >= 2 && n%2 == 0
	case OpDel, OpExpireDue:
		ok = n >= 1
	case OpSetExpire:
		ok = n == 3 && len(e.args[2]) == 8
	case OpExpire:
		ok = n == 2 && len(e.args[1]) == 8
	case OpPersist, OpDeadline:
		ok = n == 1
	case OpIncrBy:
		ok = n == 2 && len(e.args[1]) == 8
	case OpCAS:
		ok = n == 3
	case OpFlush, OpSessionOpen:
		ok = n == 0
	case OpSeq:
		ok = n == 3 && len(e.args[0]) == 8 && len(e.args[1]) == 8 && len(e.args[2]) == 8
	case OpSessionClose:
		ok = n == 1 && len(e.args[0]) == 8
	case OpRead:
		ok = n >= 1
	case OpExec:
		return checkExec(e.args)
	default:
		ok = keyspaceOp(e.op) && e.keyspaceCheck() || e.op.slotOp() && e.checkSlotOp()
	}
	if !ok {
		return fmt.Errorf("%w: op %d with %d arguments", ErrBadEntry, e.op, n)
	}
	return nil
}
