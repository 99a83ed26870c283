package replica

import (
	"errors"
	"fmt"
)

// Error classes. Every error that Apply and ReadBarrier return matches
// exactly one of the first five with errors.Is, and says by it whether the
// write took effect, which is what a caller needs to decide what to do:
//
//	class              took effect?   what the caller does
//	ErrNotLeader       no             sends it to the leader (Leader says which)
//	ErrNoLeader        no             tries again once a leader is elected
//	ErrNoSpace         no             tries again once disk space is freed
//	ErrTooLarge        no             sends less at once
//	ErrOutcomeUnknown  maybe          reads back, or retries through a session
//
// A context that ends (the caller gave up) gives an error that matches both
// the context's error and either ErrNoLeader (nothing was proposed) or
// ErrOutcomeUnknown (the write was proposed and may still take effect).
// Reads never take effect, so a read barrier that fails with
// ErrOutcomeUnknown simply did not complete.
var (
	// ErrNotLeader refuses a write at a member that does not lead its
	// group. Nothing was proposed.
	ErrNotLeader = errors.New("replica: this member is not the group's leader")
	// ErrNoLeader says the group has no leader that this member knows of,
	// for now: an election is running, or this member is cut off from a
	// majority. Nothing was proposed.
	ErrNoLeader = errors.New("replica: the group has no leader at the moment")
	// ErrNoSpace refuses a write because the disk is full. The write did not
	// take effect.
	ErrNoSpace = errors.New("no space left on device: writes are refused until space is freed on the data directory's disk; reads still work")
	// ErrTooLarge refuses a batch longer than maxBatchBytes. The write did
	// not take effect.
	ErrTooLarge = fmt.Errorf("write too large: the writes pipelined together, or one command's arguments, exceed %d MiB", maxBatchBytes>>20)
	// ErrOutcomeUnknown says a write was proposed and this member cannot
	// tell whether it took effect: it stopped, lost its leadership while
	// the write was in the log, or the caller gave up waiting.
	ErrOutcomeUnknown = errors.New("replica: the write may or may not have taken effect")
)

// Causes wrapped in the classes above.
var (
	// ErrStopped means the replica is closed or has failed. It comes
	// wrapped with ErrOutcomeUnknown.
	ErrStopped = errors.New("the node is stopping")
	// ErrLeadershipLost means this member stopped leading while the write
	// was proposed and not yet applied. It comes wrapped with
	// ErrOutcomeUnknown.
	ErrLeadershipLost = errors.New("leadership was lost")
	// ErrClosed is what Err returns once Close, not a failure, stopped the
	// replica.
	ErrClosed = errors.New("replica: closed")
)

// Precomputed errors of the common cases, so that failing a pipeline of
// writes allocates nothing per write.
var (
	errStopped        = fmt.Errorf("%w: %w", ErrOutcomeUnknown, ErrStopped)
	errLeadershipLost = fmt.Errorf("%w: %w", ErrOutcomeUnknown, ErrLeadershipLost)
	// errRemoved refuses a request at a member removed from its group,
	// before it is proposed: the member no longer leads, nor ever will.
	errRemoved = fmt.Errorf("%w: %w", ErrNotLeader, ErrRemoved)
)

// refusal is the error of a request that the replica, stopped with err,
// refuses before proposing it: ErrNotLeader at a removed member, so that
// its clients go to the group's leader, else errStopped.
func refusal(err error) error {
	if errors.Is(err, ErrRemoved) {
		return errRemoved
	}
	return errStopped
}

// gaveUp is the error of a caller whose context ended: class says whether
// its request was proposed (ErrOutcomeUnknown) or not (ErrNoLeader).
func gaveUp(class, ctxErr error) error { return fmt.Errorf("%w: %w", class, ctxErr) }

// errorf formats an error of this package.
func errorf(format string, args ...any) error { return fmt.Errorf("replica: "+format, args...) }
