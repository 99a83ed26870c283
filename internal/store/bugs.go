package store

// The store imports nothing of Flint's but internal/bugs, which imports
// nothing of Flint's either and is a constant false outside -tags flintbugs
// builds: so that a bug of the state machine is injected in it.
import "github.com/flintkv/flint/internal/bugs"

// reapply is the injected bug bugs.DoubleApply, in a session's OpSeq: it
// reports whether a write that the session applied already, and whose
// result it keeps, is to be applied again rather than answered with that
// result. A client that resends a write whose outcome it did not learn (its
// leader was killed or cut off after committing it) so has it take effect
// twice. It exists to prove that flint check catches writes applied twice;
// see package bugs.
func reapply() bool { return bugs.On(bugs.DoubleApply) }
