package transport

import "errors"

// The package's sentinel errors, classified with errors.Is.
var (
	// ErrConfig means New was given a configuration it cannot run.
	ErrConfig = errors.New("transport: bad configuration")
	// ErrClosed means the transport was closed.
	ErrClosed = errors.New("transport: closed")
	// ErrUnknownPeer means a snapshot was sent to a node without an
	// address (see Transport.SetPeer).
	ErrUnknownPeer = errors.New("transport: unknown peer")
	// ErrFrameTooLarge means a frame declared a payload over the reader's
	// limit, or a message is too large for a frame. The connection that
	// carried it is closed.
	ErrFrameTooLarge = errors.New("transport: frame over the size limit")
	// ErrCorrupt means a frame's checksum does not match, or a snapshot's
	// end marker does not count the bytes its chunks held.
	ErrCorrupt = errors.New("transport: checksum mismatch")
	// ErrMalformed means a frame that checksums but cannot be decoded, or
	// that is not what the protocol expects at that point.
	ErrMalformed = errors.New("transport: malformed frame")
	// ErrHandshake means a peer was refused before authentication: not a
	// Flint peer, another protocol version or cluster, or another node
	// than the one it meant to reach.
	ErrHandshake = errors.New("transport: handshake refused")
	// ErrAuth means a peer's proof of the cluster secret did not verify.
	ErrAuth = errors.New("transport: authentication failed (wrong cluster secret?)")
	// ErrRefused means the other end refused: the connection, or the
	// snapshot (its receiver's error, as text, follows).
	ErrRefused = errors.New("transport: refused by peer")
	// ErrSnapshotSize means a snapshot's body did not hold the size given
	// to SendSnapshot.
	ErrSnapshotSize = errors.New("transport: snapshot body size differs from its declared size")
	// ErrTooManySnapshots means the receiver already takes as many
	// snapshot streams as it allows at once.
	ErrTooManySnapshots = errors.New("transport: too many snapshot streams")
)

// Errors that stay inside the package.
var (
	// errPeerClosed and errAddrChanged say why a messages connection ended,
	// for the log.
	errPeerClosed  = errors.New("transport: the peer closed the connection")
	errAddrChanged = errors.New("transport: the peer's address changed while connecting")
	// errStreamWrite marks a failed write of a snapshot stream.
	errStreamWrite = errors.New("transport: writing a snapshot stream")
	// errUnread is the status of a snapshot whose handler returned nil
	// before reading its body to the end.
	errUnread = errors.New("transport: the receiver returned before the end of the snapshot")
)
