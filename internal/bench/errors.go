package bench

import (
	"context"
	"errors"

	"github.com/flintkv/flint/client"
)

// The package's sentinel errors, classified with errors.Is.
var (
	// ErrConfig means the configuration is invalid; the message says which
	// setting and what it accepts.
	ErrConfig = errors.New("bench: bad configuration")
	// ErrUnsupported means the target lacks a command the workload needs,
	// such as RANGE for ycsb-e against Redis. The run reports the workload
	// as unsupported rather than as zero operations.
	ErrUnsupported = errors.New("bench: workload not supported by the target")
	// ErrSpawn means the local server could not be started.
	ErrSpawn = errors.New("bench: could not start the server")
)

// The kinds of error counted in a run's errors_by_kind, besides error
// replies, which count under their code ("ERR", "WRONGTYPE", ...).
const (
	errKindUnexpected = "unexpected-reply" // a reply of the wrong type: not an error reply, not a result
	errKindUnknown    = "unknown-outcome"  // the batch was sent and its replies lost
	errKindConnect    = "connect"          // the batch could not be sent
	errKindProtocol   = "protocol"         // the server sent bytes that are not RESP
	errKindOther      = "other"
)

// batchErrKind classifies the error of a batch that failed as a whole; every
// operation in it counts as one error of that kind.
func batchErrKind(err error) string {
	switch {
	case errors.Is(err, client.ErrProtocol):
		return errKindProtocol
	case errors.Is(err, client.ErrUnknownOutcome), errors.Is(err, context.Canceled),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, client.ErrClosed):
		return errKindUnknown
	case errors.Is(err, client.ErrConnect):
		return errKindConnect
	}
	return errKindOther
}
