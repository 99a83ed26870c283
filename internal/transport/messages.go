package transport

import (
	"encoding/binary"
	"fmt"
	"slices"

	"go.etcd.io/raft/v3/raftpb"
)

// appendMessages appends frames of type messages holding msgs of group to
// dst, as many messages to a frame as fit in limit bytes of payload. A
// message too large for a frame on its own is left out and returned in
// tooLarge, in order.
func appendMessages(dst []byte, group uint64, msgs []raftpb.Message, limit int) (out []byte, tooLarge []raftpb.Message) {
	start := -1
	for i := range msgs {
		size := msgs[i].Size()
		need := binary.MaxVarintLen64 + size
		if need > limit {
			tooLarge = append(tooLarge, msgs[i])
			continue
		}
		if start >= 0 && len(dst)-start-headerSize+need > limit {
			dst, start = finishFrame(dst, start), -1
		}
		if start < 0 {
			dst, start = beginFrame(dst, typeMessages, group)
		}
		dst = appendMessage(dst, &msgs[i], size)
	}
	if start >= 0 {
		dst = finishFrame(dst, start)
	}
	return dst, tooLarge
}

// appendMessage appends m, whose Size is size, as its length and bytes.
func appendMessage(dst []byte, m *raftpb.Message, size int) []byte {
	dst = binary.AppendUvarint(dst, uint64(size))
	dst = slices.Grow(dst, size)
	n, err := m.MarshalToSizedBuffer(dst[len(dst) : len(dst)+size])
	if err != nil || n != size {
		// Marshaling into a buffer of exactly Size bytes cannot fail.
		panic(fmt.Sprintf("transport: marshaling a raft message of %d bytes: %d, %v", size, n, err))
	}
	return dst[:len(dst)+size]
}

// decodeMessages decodes the payload of a messages frame. The messages do
// not alias p.
func decodeMessages(p []byte) ([]raftpb.Message, error) {
	var msgs []raftpb.Message
	for len(p) > 0 {
		size, n := binary.Uvarint(p)
		if n <= 0 || size > uint64(len(p)-n) {
			return nil, fmt.Errorf("%w: bad message length in a messages frame", ErrMalformed)
		}
		var m raftpb.Message
		if err := m.Unmarshal(p[n : n+int(size)]); err != nil {
			return nil, fmt.Errorf("%w: raft message: %v", ErrMalformed, err)
		}
		msgs, p = append(msgs, m), p[n+int(size):]
	}
	return msgs, nil
}
