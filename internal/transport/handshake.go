package transport

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
)

// The handshake's constants (see the package doc).
const (
	magic    = "FLNTPEER"
	version  = 2
	nonceLen = 32
	macLen   = sha256.Size
	maxAddr  = 255 // the longest address a hello carries

	helloFixed   = len(magic) + 4 + 1 + 3*8 + nonceLen // a hello without its address
	challengeLen = nonceLen + macLen
)

// The kinds of connection a hello asks for.
const (
	kindMessages byte = 1
	kindSnapshot byte = 2
)

// The labels that make the server's and the client's proofs differ, so that
// neither can be replayed as the other.
const (
	serverLabel = "flint peer server proof v1\x00"
	clientLabel = "flint peer client proof v1\x00"
)

// hello is the first frame of a connection: who is calling whom, for what.
type hello struct {
	version           uint32
	kind              byte
	cluster, from, to uint64
	nonce             [nonceLen]byte
	addr              string // the caller's peer address, as its group knows it; may be empty
}

// encode returns h's payload.
func (h *hello) encode() []byte {
	b := append(make([]byte, 0, helloFixed+1+len(h.addr)), magic...)
	b = binary.LittleEndian.AppendUint32(b, h.version)
	b = append(b, h.kind)
	b = binary.LittleEndian.AppendUint64(b, h.cluster)
	b = binary.LittleEndian.AppendUint64(b, h.from)
	b = binary.LittleEndian.AppendUint64(b, h.to)
	b = append(b, h.nonce[:]...)
	b = append(b, byte(len(h.addr)))
	return append(b, h.addr...)
}

// decodeHello decodes a hello's payload. Its magic and version come first
// in every version, so that any version can tell who it is talking to.
func decodeHello(p []byte) (hello, error) {
	var h hello
	if len(p) < len(magic)+4 || string(p[:len(magic)]) != magic {
		return h, fmt.Errorf("%w: not a Flint peer (bad magic)", ErrHandshake)
	}
	if h.version = binary.LittleEndian.Uint32(p[len(magic):]); h.version != version {
		return h, fmt.Errorf("%w: protocol version %d, this node speaks %d", ErrHandshake, h.version, version)
	}
	if len(p) < helloFixed+1 || len(p) != helloFixed+1+int(p[helloFixed]) {
		return h, fmt.Errorf("%w: hello of %d bytes, want %d and its address", ErrMalformed, len(p), helloFixed+1)
	}
	h.addr = string(p[helloFixed+1:])
	p = p[len(magic)+4:]
	h.kind = p[0]
	h.cluster = binary.LittleEndian.Uint64(p[1:])
	h.from = binary.LittleEndian.Uint64(p[9:])
	h.to = binary.LittleEndian.Uint64(p[17:])
	copy(h.nonce[:], p[25:])
	return h, nil
}

// check reports why a server that is node self of cluster refuses h, if it
// does.
func (h *hello) check(cluster, self uint64) error {
	switch {
	case h.kind != kindMessages && h.kind != kindSnapshot:
		return fmt.Errorf("%w: unknown connection kind %d", ErrHandshake, h.kind)
	case h.cluster != cluster:
		return fmt.Errorf("%w: cluster id %d, this node is of cluster %d", ErrHandshake, h.cluster, cluster)
	case h.to != self:
		return fmt.Errorf("%w: the peer meant to reach node %d, this is node %d", ErrHandshake, h.to, self)
	case h.from == 0:
		return fmt.Errorf("%w: the peer calls itself node 0", ErrHandshake)
	}
	return nil
}

// proof is the HMAC-SHA256, keyed with the cluster secret, of label, the
// hello's payload and the server's nonce: both nonces and every claim of
// the hello.
func proof(secret []byte, label string, helloPayload, serverNonce []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	m.Write(helloPayload)
	m.Write(serverNonce)
	return m.Sum(nil)
}

// newNonce returns a fresh random nonce.
func newNonce() [nonceLen]byte {
	var n [nonceLen]byte
	rand.Read(n[:]) // crypto/rand.Read does not fail (it crashes the program first)
	return n
}

// handshake is one side of a connection's handshake: the frames it has
// read and the stream it writes to.
type handshake struct {
	r      *frameReader
	w      io.Writer
	secret []byte
}

// expect reads the next frame, which must be of type typ with a payload of
// n bytes (any length if n < 0). A status frame from the other side, its
// refusal, is returned as an error wrapping ErrRefused.
func (hs *handshake) expect(typ byte, n int) ([]byte, error) {
	f, err := hs.r.next()
	switch {
	case err != nil:
		return nil, err
	case f.typ == typeStatus && typ != typeStatus:
		return nil, fmt.Errorf("%w: %s", ErrRefused, statusText(f.payload))
	case f.typ != typ || f.group != 0:
		return nil, fmt.Errorf("%w: frame of type %d (group %d) during the handshake, want type %d", ErrMalformed, f.typ, f.group, typ)
	case n >= 0 && len(f.payload) != n:
		return nil, fmt.Errorf("%w: handshake frame of type %d with %d bytes, want %d", ErrMalformed, typ, len(f.payload), n)
	}
	return f.payload, nil
}

// send writes one handshake frame.
func (hs *handshake) send(typ byte, payload []byte) error {
	_, err := hs.w.Write(appendFrame(nil, typ, 0, payload))
	return err
}

// client runs the calling side: it says hello, checks the server's proof,
// gives its own and waits to be accepted.
func (hs *handshake) client(h hello) error {
	hp := h.encode()
	if err := hs.send(typeHello, hp); err != nil {
		return err
	}
	ch, err := hs.expect(typeChallenge, challengeLen)
	if err != nil {
		return err
	}
	serverNonce, mac := ch[:nonceLen], ch[nonceLen:]
	if !hmac.Equal(mac, proof(hs.secret, serverLabel, hp, serverNonce)) {
		return fmt.Errorf("%w: the server's proof does not verify", ErrAuth)
	}
	if err := hs.send(typeProof, proof(hs.secret, clientLabel, hp, serverNonce)); err != nil {
		return err
	}
	return hs.accepted()
}

// accepted reads the server's last word: an empty status, or its refusal.
func (hs *handshake) accepted() error {
	st, err := hs.expect(typeStatus, -1)
	if err == nil && len(st) > 0 {
		err = fmt.Errorf("%w: %s", ErrRefused, statusText(st))
	}
	return err
}

// server runs the called side for node self of cluster: it checks the
// hello, proves itself, and checks the client's proof. It returns the
// hello once the client is authenticated; the caller then accepts it with
// an empty status frame.
func (hs *handshake) server(cluster, self uint64) (hello, error) {
	hp, err := hs.expect(typeHello, -1)
	if err != nil {
		return hello{}, err
	}
	hp = bytes.Clone(hp) // the reader's buffer holds the next frame after this one
	h, err := decodeHello(hp)
	if err == nil {
		err = h.check(cluster, self)
	}
	if err != nil {
		return h, err
	}
	nonce := newNonce()
	if err := hs.send(typeChallenge, append(nonce[:], proof(hs.secret, serverLabel, hp, nonce[:])...)); err != nil {
		return h, err
	}
	mac, err := hs.expect(typeProof, macLen)
	if err != nil {
		return h, err
	}
	if !hmac.Equal(mac, proof(hs.secret, clientLabel, hp, nonce[:])) {
		return h, fmt.Errorf("%w: node %d's proof does not verify", ErrAuth, h.from)
	}
	return h, nil
}

// maxStatusText bounds how much of a peer's status text is shown.
const maxStatusText = 200

// statusText returns a status payload as printable text, shortened.
func statusText(p []byte) string {
	if len(p) > maxStatusText {
		p = p[:maxStatusText]
	}
	return string(bytes.ToValidUTF8(p, []byte("?")))
}

// ReadCaller reads the first frame of a connection a node opened, its
// hello, and returns the frame as it came and the calling node's id, for a
// relay between nodes (such as flint check's partitioning proxies) that
// decides by the caller what to do with the connection and, to let it
// through, writes the frame on and copies the rest both ways. It
// authenticates nothing: the node called still checks the hello and the
// caller's proof.
func ReadCaller(r io.Reader) (frame []byte, from uint64, err error) {
	fr := &frameReader{r: r, max: maxHandshakeFrame}
	hs := handshake{r: fr}
	hp, err := hs.expect(typeHello, -1)
	if err != nil {
		return nil, 0, err
	}
	h, err := decodeHello(hp)
	if err != nil {
		return nil, 0, err
	}
	return appendFrame(nil, typeHello, 0, hp), h.from, nil
}
