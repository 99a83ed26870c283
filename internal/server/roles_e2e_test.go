package server_test

import (
	"strconv"
	"testing"

	"github.com/flintkv/flint/internal/protocol"
	"github.com/flintkv/flint/internal/server"
	"github.com/flintkv/flint/internal/server/servertest"
	"github.com/flintkv/flint/internal/store"
)

// TestRolesAndMapEpoch: FLINT.ROLES names the process and gives this
// member's group, id and role (ALL the same, for a member that hosts no
// others); FLINT.MAP given the epoch of the map here sends a null in the
// map's place, and the map for any other epoch.
func TestRolesAndMapEpoch(t *testing.T) {
	f := newFakeShard(t)
	f.Local = server.Local{S: store.New(store.Options{})}
	c := dialRaw(t, servertest.StartBackend(t, server.Config{}, f).Addr)
	for _, lead := range []uint64{1, 3} {
		f.mu.Lock()
		f.mu.lead = lead
		f.mu.Unlock()
		role := map[bool]string{true: "master", false: "slave"}[lead == 1]
		for _, args := range [][]string{{"FLINT.ROLES"}, {"FLINT.ROLES", "all"}} {
			v := c.do(args...)
			if len(v.Elems) != 4 || string(v.Elems[0].Str) != server.RunID() || v.Elems[1].Int != 2 || v.Elems[2].Int != 1 ||
				string(v.Elems[3].Str) != role {
				t.Errorf("%q with member %d leading: %s, want [run id, 2, 1, %s]", args, lead, v, role)
			}
		}
	}
	if got := c.do("FLINT.ROLES", "x").String(); got != "(error) ERR syntax error" {
		t.Errorf("FLINT.ROLES x: %s", got)
	}
	epoch := f.view.Map.Epoch
	for _, tc := range []struct {
		args []string
		null bool
	}{
		{[]string{"FLINT.MAP"}, false},
		{[]string{"FLINT.MAP", strconv.FormatUint(epoch, 10)}, true},
		{[]string{"FLINT.MAP", strconv.FormatUint(epoch+1, 10)}, false},
	} {
		v := c.do(tc.args...)
		if len(v.Elems) != 3 || (v.Elems[0].Kind == protocol.KindNull) != tc.null {
			t.Errorf("%q: %.80s, want a null map: %v", tc.args, v, tc.null)
		}
	}
}
