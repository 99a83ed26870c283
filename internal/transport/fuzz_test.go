package transport

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// FuzzFrame reads arbitrary bytes as a stream of frames, decoding each
// payload by its type, as a snapshot stream, and as the payload of each
// type (which the checksum would otherwise keep the fuzzer from reaching).
// Nothing may panic; a frame that reads encodes back to the bytes it came
// from; messages and hellos that decode encode back to what decodes the
// same.
func FuzzFrame(f *testing.F) {
	good := hello{version: version, kind: kindMessages, cluster: 1, from: 2, to: 3, addr: "127.0.0.1:7001"}
	msgs := []raftpb.Message{msg(1, []byte("data")), snapMsg(), {Type: raftpb.MsgHeartbeat}}
	stream, _ := appendMessages(appendFrame(nil, typeHello, 0, good.encode()), 5, msgs, math.MaxInt32)
	f.Add(stream)
	f.Add(appendFrame(appendFrame(nil, typeSnapChunk, 1, []byte("chunk")), typeSnapEnd, 1, binary.LittleEndian.AppendUint64(nil, 5)))
	f.Add(appendFrame(nil, typeMessages, 1, []byte{3, 8, 1, 16}))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add(good.encode())
	f.Add(stream[2*headerSize+len(good.encode()):]) // a messages frame's payload
	f.Fuzz(func(t *testing.T, data []byte) {
		src := bytes.NewReader(data)
		r := &frameReader{r: src, max: 1 << 20}
		for start := len(data); ; start = src.Len() {
			fr, err := r.next()
			if err != nil {
				break
			}
			if got := appendFrame(nil, fr.typ, fr.group, fr.payload); !bytes.Equal(got, data[len(data)-start:len(data)-src.Len()]) {
				t.Fatalf("frame of type %d re-encodes differently", fr.typ)
			}
			checkPayload(t, fr)
		}
		io.Copy(io.Discard, &snapshotBody{r: &frameReader{r: bytes.NewReader(data), max: 1 << 20}, group: 1})
		checkPayload(t, frame{typ: typeMessages, group: 1, payload: data})
		checkPayload(t, frame{typ: typeHello, payload: data})
	})
}

// checkPayload decodes a frame's payload by its type and checks that what
// decodes encodes back stably.
func checkPayload(t *testing.T, fr frame) {
	switch fr.typ {
	case typeMessages:
		msgs, err := decodeMessages(fr.payload)
		if err != nil {
			return
		}
		once, _ := appendMessages(nil, fr.group, msgs, math.MaxInt32)
		again := decodeFrames(t, once)
		twice, _ := appendMessages(nil, fr.group, again, math.MaxInt32)
		if !bytes.Equal(once, twice) {
			t.Fatalf("%d messages do not encode stably", len(msgs))
		}
	case typeHello:
		if h, err := decodeHello(fr.payload); err == nil && !bytes.Equal(h.encode(), fr.payload) {
			t.Fatalf("hello %+v encodes differently", h)
		}
	}
}

// decodeFrames decodes the messages of a stream of messages frames that
// must read.
func decodeFrames(t *testing.T, b []byte) []raftpb.Message {
	r := &frameReader{r: bytes.NewReader(b), max: math.MaxInt32}
	var out []raftpb.Message
	for {
		fr, err := r.next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("reading frames just written: %v", err)
		}
		msgs, err := decodeMessages(fr.payload)
		if err != nil {
			t.Fatalf("decoding messages just encoded: %v", err)
		}
		out = append(out, msgs...)
	}
}

// FuzzHandshake gives arbitrary bytes to each side of the handshake as what
// the other side sent. Neither may panic or authenticate: the nonces are
// fresh, so no input can hold a valid proof.
func FuzzHandshake(f *testing.F) {
	good := hello{version: version, kind: kindMessages, cluster: cluster, from: 1, to: 2}
	f.Add(appendFrame(appendFrame(nil, typeHello, 0, good.encode()), typeProof, 0, make([]byte, macLen)))
	f.Add(appendFrame(appendFrame(nil, typeChallenge, 0, make([]byte, challengeLen)), typeStatus, 0, nil))
	f.Add(appendFrame(nil, typeStatus, 0, []byte("refused")))
	f.Fuzz(func(t *testing.T, data []byte) {
		server := handshake{r: &frameReader{r: bytes.NewReader(data), max: maxHandshakeFrame}, w: io.Discard, secret: secret}
		if _, err := server.server(cluster, 2); err == nil {
			t.Fatal("the server authenticated a client that could not know its nonce")
		}
		client := handshake{r: &frameReader{r: bytes.NewReader(data), max: maxHandshakeFrame}, w: io.Discard, secret: secret}
		if err := client.client(hello{version: version, kind: kindMessages, cluster: cluster, from: 1, to: 2, nonce: newNonce()}); err == nil {
			t.Fatal("the client authenticated a server that could not know its nonce")
		}
	})
}
