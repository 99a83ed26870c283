package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// entryVersion is the version byte of the raft entry data written here:
// version 2 carries the leader's time (see the package doc); version 1,
// without it, is still read.
const entryVersion = 2

// appendHeader starts the raft entry data of count batches proposed at
// time now (unix nanoseconds, the leader's clock).
func appendHeader(dst []byte, now int64, count int) []byte {
	dst = append(dst, entryVersion)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(now))
	return binary.AppendUvarint(dst, uint64(count))
}

// appendProposal adds one batch to the raft entry data being built in dst,
// after appendHeader.
func appendProposal(dst []byte, id uint64, batch []byte) []byte {
	dst = binary.AppendUvarint(dst, id)
	dst = binary.AppendUvarint(dst, uint64(len(batch)))
	return append(dst, batch...)
}

// errBadData means raft entry data could not be decoded.
var errBadData = errors.New("replica: malformed entry data")

// entryTime returns the leader's time that raft entry data carries: 0 for
// version 1, which has none, or for data too short to hold one.
func entryTime(data []byte) int64 {
	if len(data) < 9 || data[0] != 2 {
		return 0
	}
	return int64(binary.LittleEndian.Uint64(data[1:]))
}

// eachProposal calls fn for every batch in raft entry data.
func eachProposal(data []byte, fn func(id uint64, batch []byte) error) error {
	head := 1 // version 1: the version byte
	switch {
	case len(data) >= 2 && data[0] == 1:
	case len(data) >= 10 && data[0] == 2:
		head = 9 // and the time
	default:
		return fmt.Errorf("%w: bad version", errBadData)
	}
	count, w := binary.Uvarint(data[head:])
	if w <= 0 {
		return fmt.Errorf("%w: bad count", errBadData)
	}
	p := data[head+w:]
	for i := uint64(0); i < count; i++ {
		id, w1 := binary.Uvarint(p)
		if w1 <= 0 {
			return fmt.Errorf("%w: bad id of batch %d", errBadData, i)
		}
		n, w2 := binary.Uvarint(p[w1:])
		if w2 <= 0 || n > uint64(len(p)-w1-w2) {
			return fmt.Errorf("%w: batch %d overruns the entry", errBadData, i)
		}
		b := p[w1+w2 : w1+w2+int(n)]
		p = p[w1+w2+int(n):]
		if err := fn(id, b); err != nil {
			return err
		}
	}
	if len(p) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", errBadData, len(p))
	}
	return nil
}
