package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// entryVersion is the version byte of the raft entry data written here.
const entryVersion = 1

// appendProposal adds one batch to the raft entry data being built in dst.
// The caller writes the header first: entryVersion, then the count of
// batches as a uvarint (see loop.propose and the package doc).
func appendProposal(dst []byte, id uint64, batch []byte) []byte {
	dst = binary.AppendUvarint(dst, id)
	dst = binary.AppendUvarint(dst, uint64(len(batch)))
	return append(dst, batch...)
}

// errBadData means raft entry data could not be decoded.
var errBadData = errors.New("replica: malformed entry data")

// eachProposal calls fn for every batch in raft entry data.
func eachProposal(data []byte, fn func(id uint64, batch []byte) error) error {
	if len(data) < 2 || data[0] != entryVersion {
		return fmt.Errorf("%w: bad version", errBadData)
	}
	count, w := binary.Uvarint(data[1:])
	if w <= 0 {
		return fmt.Errorf("%w: bad count", errBadData)
	}
	p := data[1+w:]
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
