package server

import (
	"errors"
)

// Bounds on the input that connections hold. A connection's input buffer
// grows as a command's bytes arrive, never to a length the client declared
// before sending it, up to --max-query-buffer. The arguments of the
// command being parsed count argCost bytes each towards that limit too,
// so that a command of many tiny arguments costs no more. And the parts of
// all connections' input buffers beyond their first readAhead bytes, which
// only commands larger than that need, share --max-input-memory: a
// connection whose command would take more than is left is closed with an
// error. So all connections' input takes at most
// MaxClients*readAhead + MaxInputMemory bytes, plus argCost per argument.

// argCost is what the server holds per argument of a command, besides its
// bytes: the parser's span of it (16 bytes) and its slice (24).
const argCost = 40

// maxKeptArgs is the most argument slots a connection keeps for its next
// command once one with more is done.
const maxKeptArgs = 1024

var errInputMemory = errors.New("the server's memory for large commands is in use (max-input-memory)")

// inputLimit is how many bytes of input the connection may buffer now.
func (c *conn) inputLimit() int {
	return c.srv.cfg.MaxQueryBuffer - argCost*c.parser.Pending()
}

// growIn doubles the input buffer, to at most limit bytes, keeping the
// unparsed input. It reports false, with readErr set, if the server's
// input memory has not that much left.
func (c *conn) growIn(limit int) bool {
	if !c.resizeIn(min(2*len(c.in), limit)) {
		c.readErr = errInputMemory
		return false
	}
	return true
}

// resizeIn replaces the input buffer with one of n bytes, keeping the
// unparsed input, which must fit, and takes from the server's input memory
// what it has beyond readAhead, or gives back what it no longer has. It
// reports false, changing nothing, if there is not enough left.
func (c *conn) resizeIn(n int) bool {
	share := int64(max(n-readAhead, 0))
	if more := share - c.inputShare; more > 0 && !c.srv.takeInput(more) {
		return false
	}
	c.srv.inputUsed.Add(min(share-c.inputShare, 0))
	c.inputShare = share
	buf := make([]byte, n)
	copy(buf, c.in[:c.inLen])
	c.in = buf
	return true
}

// releaseInput gives back the connection's share of the input memory, as
// it closes.
func (c *conn) releaseInput() {
	c.srv.inputUsed.Add(-c.inputShare)
	c.inputShare = 0
}

// takeInput takes n bytes of MaxInputMemory, if that many are left.
func (s *Server) takeInput(n int64) bool {
	for {
		used := s.inputUsed.Load()
		if used+n > int64(s.cfg.MaxInputMemory) {
			return false
		}
		if s.inputUsed.CompareAndSwap(used, used+n) {
			return true
		}
	}
}
