// Package bugs injects known bugs into Flint, so that tests can show that
// `flint check` catches them. The bugs exist only in binaries built with
// `-tags flintbugs`, and act only when the FLINT_BUGS environment variable
// names them (comma-separated). In every other build On is a constant
// false and the compiler removes the buggy paths.
package bugs

// Bug names one injectable bug.
type Bug string

// The bugs.
const (
	// StaleRead serves GET from a view of the store up to 200 ms old.
	StaleRead Bug = "stale-read"
	// LoseWrite drops the last write in the log at startup, as a torn-tail
	// repair that cuts one record too many would.
	LoseWrite Bug = "lose-write"
	// Reorder acknowledges a batch of plain SETs before applying it, and
	// applies it only after the next write: a later write can be overtaken
	// by an earlier one.
	Reorder Bug = "reorder"
	// AckEarly makes a leader apply and acknowledge the writes it proposes
	// once they are in its own log, before a majority has them.
	AckEarly Bug = "ack-early"
	// StaleLeaderRead makes a member that has led answer reads from its own
	// state at once, without a read index, until it hears of another leader.
	StaleLeaderRead Bug = "stale-leader-read"
	// DoubleApply makes a client session apply a retried write again rather
	// than answer it with the result it kept.
	DoubleApply Bug = "double-apply"
)
