package replica

import (
	"testing"

	"github.com/flintkv/flint/internal/vfs"
)

// TestReadAfterRestartSeesAcknowledgedWrites: an acknowledged write whose
// commit index was not yet on disk at the crash (it never is: only a later
// write saves it) is committed again by the restarted leader's first entry;
// a read after Open must wait for that, not answer from the older commit
// index raft restarts with.
func TestReadAfterRestartSeesAcknowledgedWrites(t *testing.T) {
	mem := vfs.NewMem()
	r := open(t, mem, Options{})
	set(t, r, "a", "old")
	set(t, r, "a", "new")
	mem.Crash()
	r = open(t, mem, Options{})
	defer r.Close()
	if got := get(t, r, "a"); got != "new" {
		t.Fatalf("a read right after restart: a = %s, want the acknowledged new", got)
	}
}
