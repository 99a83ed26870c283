package server

import (
	"errors"

	"github.com/flintkv/flint/internal/replica"
	"github.com/flintkv/flint/internal/store"
)

// errorReply is the one table from the errors of the store and the backend
// to the error replies clients see (without the leading '-'). Errors of a
// class that did not take effect say so, and what to do, in Redis's style;
// one whose outcome is unknown says that too, with a code of its own
// (UNKNOWN), since a client that retries it without a session may apply it
// twice, and one in a session resends it (FLINT.SEQ applies it once).
func errorReply(err error) string {
	switch {
	case errors.Is(err, store.ErrNotInteger):
		return "ERR value is not an integer or out of range"
	case errors.Is(err, store.ErrOverflow):
		return "ERR increment or decrement would overflow"
	case errors.Is(err, store.ErrTooLarge):
		return "ERR string exceeds maximum allowed size (max-bulk)"
	case errors.Is(err, store.ErrNoSuchKey):
		return "ERR no such key"
	case errors.Is(err, store.ErrNotFloat):
		return "ERR value is not a valid float"
	case errors.Is(err, store.ErrNaN):
		return "ERR increment would produce NaN or Infinity"
	case errors.Is(err, replica.ErrNotLeader):
		return "READONLY You can't write against a replica: this member does not lead its group; send writes to the leader"
	case errors.Is(err, replica.ErrNoLeader):
		return "CLUSTERDOWN The cluster is down: the group has no leader at the moment (an election is running, or this member is cut off from a majority); try again"
	case errors.Is(err, store.ErrSlotMoving):
		return tryAgain
	case errors.Is(err, store.ErrSessionExpired):
		return "SESSIONEXPIRED the client session expired or is unknown; open a new one with FLINT.SESSION"
	case errors.Is(err, replica.ErrOutcomeUnknown):
		return "UNKNOWN " + err.Error() + "; read the key back before retrying, or resend it in its session"
	default:
		return "ERR " + err.Error()
	}
}
