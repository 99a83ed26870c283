// Package transport carries raft messages and snapshots between the nodes of
// a Flint cluster, for every raft group on them. Nodes are addressed by node
// id; every frame names its group. Raft member ids inside the messages are
// the caller's business.
//
// # Connections
//
// A Transport keeps one outgoing TCP connection to each peer (SetPeer), over
// which a writer goroutine sends raft messages: it takes every message
// queued since it last did, and writes them as frames and writes of at most
// 2 MiB (or one message, up to MaxFrameBytes), letting go of each message
// once encoded. Send never blocks: it queues, or, when the peer is not
// connected or its queue is full, drops and reports the route (node, group)
// to Handler.Unreachable from the transport's notifier goroutine. After a
// failure the writer reconnects, waiting 50 ms doubling to 1 s between
// attempts (each wait drawn from the upper half of its step); a peer that
// closes the connection is noticed at once, not at the next write. Two nodes
// each have their own connection to the other. A node that connects again
// replaces its older connection at the receiver.
//
// Each snapshot goes on a connection of its own, so that its megabytes
// never hold up the messages of any group; its writes block only its
// goroutine (TCP's flow control). At most MaxSnapshots streams are sent at
// once (the others wait) and received at once (the others are refused). A
// stream fails when one of its frames takes 30 s to be written or to
// arrive, or when its receiver has not answered 5 minutes after its end,
// so that a peer that hangs never holds up a group's snapshot for ever.
// Messages connections have no such timeout, since they may be idle: a
// writer held up by a peer that stopped reading only lets its queue fill,
// and what does not fit is dropped.
//
// # Trust
//
// Peers prove knowledge of the cluster secret to each other with HMAC-SHA256
// over both sides' random nonces; the secret never crosses the wire. A
// connection is refused (and closed, and its reason logged once) when its
// first frames are not a Flint handshake, name another protocol version,
// cluster or node, or fail the proof. Before authentication frames are
// limited to 4 KiB and the handshake to 5 s, and at most 64 connections may
// be in their handshake at once. The transport authenticates peers but
// neither encrypts nor protects the stream after the handshake from an
// attacker on the network path: that needs TLS.
//
// # Format, version 2
//
// Both directions of every connection are a sequence of frames. Integers are
// little-endian.
//
//	+------------+------------+------+--------------+---------------+
//	| len uint32 | crc uint32 | type | group uint64 | payload       |
//	+------------+------------+------+--------------+---------------+
//	  4 bytes      4 bytes      1 B    8 bytes        len bytes
//
// crc is the CRC-32C (Castagnoli) of the len bytes, the type, the group and
// the payload: everything but the crc itself. A frame whose len is over the
// reader's limit (4 KiB before authentication, MaxFrameBytes after) is
// refused before its payload is read; one whose crc does not match, or
// whose type is not expected, ends the connection. A reader's memory grows
// with the bytes that arrive, never with what len claims. Frames that
// concern no group (the handshake) carry group 0.
//
// A connection starts with the handshake; C is the calling node, S the one
// called:
//
//	C->S type 1, hello:     "FLNTPEER" (8 bytes), version uint32 (2), kind (1 byte: 1 messages, 2 snapshot),
//	                        cluster uint64, from uint64 (C's node id), to uint64 (the node id C means to reach),
//	                        nonce (32 random bytes), addr length (1 byte), addr (C's peer address, may be empty)
//	S->C type 2, challenge: nonce (32 random bytes), HMAC-SHA256(secret, "flint peer server proof v1\x00" ‖ hello ‖ S's nonce)
//	C->S type 3, proof:     HMAC-SHA256(secret, "flint peer client proof v1\x00" ‖ hello ‖ S's nonce)
//	S->C type 4, status:    empty: accepted
//
// where hello is the hello's whole payload. S checks the hello (magic,
// version, kind, its cluster id and its own node id as to, a non-zero
// from) before it answers, and C checks S's proof before it gives its own,
// so that neither proves anything to a party that has not proven itself or
// that it did not choose. Either side that refuses sends a status frame
// whose payload is the reason as text, then closes. The frame header and
// the hello's magic and version are the same in every version, so that a
// node can tell a peer of another version why it is refused. Once C is
// authenticated, S connects back to C at addr if it knows no address for
// C (SetPeer): a member that joins a group knows only the members it was
// started with until the group's state reaches it, and must be able to
// answer a leader added since.
//
// On a messages connection, after the handshake, only C writes:
//
//	type 16, messages: one or more of (len uvarint, raftpb.Message as protobuf), to the payload's end
//
// each frame holding raft messages of its group, in the order they were
// sent. A message too large for a frame of MaxFrameBytes is dropped by its
// sender (and logged).
//
// On a snapshot connection, after the handshake, C writes one snapshot:
//
//	type 17, begin: the MsgSnap as protobuf
//	type 18, chunk: up to 1 MiB of the snapshot's bytes (any number of chunks)
//	type 19, end:   total uint64, the sum of the chunks' lengths
//
// all with the snapshot's group, and S answers with one status frame (type
// 4, the same group): empty once the handler took the whole snapshot,
// otherwise the reason it was not taken, as text. Each chunk is checked by
// its frame's crc as the handler reads it; a bad chunk, a missing end or an
// end whose total is wrong is a Read error, which the handler returns.
package transport
