package server_test

import (
	"strings"
	"testing"

	"github.com/flintkv/flint/internal/server"
	"github.com/flintkv/flint/internal/server/servertest"
	"github.com/flintkv/flint/internal/store"
)

// TestSlotMoveRouting takes a data node of group 2 (newFakeShard) through
// both sides of a slot move with FLINT.SLOTS, and checks how it answers
// each phase: as the source of slot 7365 ("c") going to group 3, reads
// and RANGE served and writes TRYAGAIN while it leaves, then ASK to group
// 3, and RANGE TRYAGAIN once it is gone and, after the drop, while the
// node's map is older than the drop's; as the target of slot 3300 ("b")
// coming from group 1, MOVED to the source while it imports, TRYAGAIN
// after ASKING (also in a transaction that MULTI began right after
// ASKING) and for RANGE, then served once it is open.
func TestSlotMoveRouting(t *testing.T) {
	f := newFakeShard(t)
	f.mu.lead = 1
	f.Local = server.Local{S: store.New(store.Options{Group: 2})}
	c := dialRaw(t, servertest.StartBackend(t, server.Config{}, f).Addr)
	const try = "(error) TRYAGAIN the key's slot is moving to another group; try again"
	const fenceErr = "(error) ERR FLINT.SLOTS FENCE takes a term, an integer, and a logged step: LEAVE, GONE, DROP, IMPORT, OPEN, STAY or SESSIONS-IMPORT"
	for _, tc := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"MSET", "c", "1", "{c}x", "2"}, `"OK"`},
		{[]string{"SET", "g", "3"}, `"OK"`},                         // slot 7233
		{[]string{"SET", "k", "4"}, `"OK"`},                         // slot 7629
		{[]string{"FLINT.SLOTS", "GONE", "7365", "7365", "3"}, "0"}, // not leaving yet
		{[]string{"FLINT.SLOTS", "LEAVE", "7365", "7365", "3"}, "1"},
		{[]string{"GET", "c"}, `"1"`},
		{[]string{"SET", "c", "2"}, try},
		{[]string{"FLINT.SEQ", "1", "1", "1", "SET", "c", "2"}, try},
		{[]string{"FLINT.SLOTS", "STATUS"}, `[[7365 7365 "leaving" 3 0]]`},
		{[]string{"FLINT.SLOTS", "EXPORT", "7365", "7365", "", "1"}, `["c" ["c" "1" "0"]]`},
		{[]string{"FLINT.SLOTS", "EXPORT", "7365", "7365", "c", "1"}, `["" ["{c}x" "2" "0"]]`},
		{[]string{"RANGE", "a", "z"}, `["c" "1" "g" "3" "k" "4"]`},
		{[]string{"FLINT.SLOTS", "GONE", "7365", "7365", "3"}, "1"},
		{[]string{"GET", "c"}, "(error) ASK 7365 127.0.0.1:7301"},
		{[]string{"SET", "c", "2"}, "(error) ASK 7365 127.0.0.1:7301"},
		{[]string{"RANGE", "a", "z"}, try},
		{[]string{"RANGE", "a", "z", "LIMIT", "1"}, try},
		{[]string{"FLINT.SLOTS", "DROP", "7365", "7365", "3", "2"}, "1"},
		{[]string{"DBSIZE"}, "2"},
		{[]string{"RANGE", "a", "z"}, try},                        // the map, of epoch 1, still gives this group slot 7365
		{[]string{"GET", "c"}, "(error) ASK 7365 127.0.0.1:7301"}, // the map, of epoch 1, is older than the drop

		{[]string{"GET", "b"}, "(error) MOVED 3300 127.0.0.1:7102"},
		{[]string{"FLINT.SLOTS", "IMPORT", "3300", "3300", "1", "b", "v", "0"}, "1"},
		{[]string{"FLINT.SLOTS", "IMPORT", "3300", "3300", "1", "a", "v", "0"}, "(error) ERR FLINT.SLOTS IMPORT takes keys of its slots only, each with its value and deadline (Unix ms, 0 for none)"},
		{[]string{"FLINT.SLOTS", "IMPORT", "3300", "3300", "1", "b", "v"}, "(error) ERR wrong number of arguments for 'flint.slots|import' command"},
		{[]string{"GET", "b"}, "(error) MOVED 3300 127.0.0.1:7102"},
		{[]string{"ASKING"}, `"OK"`},
		{[]string{"GET", "b"}, try},
		{[]string{"RANGE", "a", "z"}, try},
		// ASKING before MULTI holds for the transaction, and ends with it.
		{[]string{"ASKING"}, `"OK"`},
		{[]string{"MULTI"}, `"OK"`},
		{[]string{"SET", "b", "x"}, try},
		{[]string{"EXEC"}, "(error) EXECABORT Transaction discarded because of previous errors."},
		{[]string{"GET", "b"}, "(error) MOVED 3300 127.0.0.1:7102"},
		{[]string{"ASKING"}, `"OK"`},
		{[]string{"MULTI"}, `"OK"`},
		{[]string{"DISCARD"}, `"OK"`},
		{[]string{"GET", "b"}, "(error) MOVED 3300 127.0.0.1:7102"},
		{[]string{"MULTI"}, `"OK"`},
		{[]string{"SET", "b", "x"}, "(error) MOVED 3300 127.0.0.1:7102"},
		{[]string{"DISCARD"}, `"OK"`},
		{[]string{"FLINT.SLOTS", "OPEN", "3300", "3300", "1"}, "1"},
		{[]string{"GET", "b"}, `"v"`},
		{[]string{"INCR", "{b}n"}, "1"},
		{[]string{"FLINT.SLOTS", "IMPORT", "3300", "3300", "1", "b", "old", "0"}, "0"}, // open: nothing more comes in
		{[]string{"GET", "b"}, `"v"`},

		{[]string{"FLINT.SLOTS", "LEAVE", "5", "4", "3"}, "(error) ERR slots must be 0 to 16383, first at most last, and groups and epochs integers"},
		{[]string{"FLINT.SLOTS", "LEAVE", "1", "2"}, "(error) ERR wrong number of arguments for 'flint.slots|leave' command"},
		{[]string{"FLINT.SLOTS", "FOO"}, "(error) ERR unknown subcommand 'FOO'. Try LEAVE, GONE, DROP, IMPORT, OPEN, STAY, SESSIONS-IMPORT, EXPORT, SESSIONS or STATUS."},
		{[]string{"FLINT.SLOTS", "FENCE", "7", "LEAVE", "100", "100", "3"}, "1"},
		{[]string{"FLINT.SLOTS", "FENCE", "6", "STAY", "100", "100", "3"}, "0"}, // an earlier term's: refused
		{[]string{"FLINT.SLOTS", "STATUS"}, `[[100 100 "leaving" 3 0] [3300 3300 "open" 1 0] [7365 7365 "dropped" 3 2]]`},
		{[]string{"FLINT.SLOTS", "FENCE", "7", "STAY", "100", "100", "3"}, "1"},
		{[]string{"FLINT.SLOTS", "FENCE", "7", "LEAVE", "1", "2"}, "(error) ERR wrong number of arguments for 'flint.slots|leave' command"},
		{[]string{"FLINT.SLOTS", "FENCE", "x", "LEAVE", "1", "2", "3"}, fenceErr},
		{[]string{"FLINT.SLOTS", "FENCE", "7", "STATUS"}, fenceErr},
		{[]string{"FLINT.SEQ", "1", "1", "1", "FLINT.SLOTS", "LEAVE", "1", "2", "3"}, "(error) ERR FLINT.SEQ runs a write command, such as SET, INCR or DEL, or EXEC"},
		{[]string{"FLINT.MAPSET", "{}"}, "(error) ERR FLINT.MAPSET is for the managers of a sharded cluster"},
	} {
		if got := c.do(tc.cmd...).String(); got != tc.want {
			t.Errorf("%q = %s, want %s", tc.cmd, got, tc.want)
		}
	}
}

// TestMapSet: a manager takes a new map through FLINT.MAPSET only at the
// next epoch, and refuses one that does not decode.
func TestMapSet(t *testing.T) {
	f := newFakeShard(t)
	f.mu.lead = 1
	f.view.Group = 0
	st := store.New(store.Options{})
	st.Put([]byte(server.MapKey), f.view.Map.Encode())
	f.Local = server.Local{S: st}
	c := dialRaw(t, servertest.StartBackend(t, server.Config{}, f).Addr)
	next, err := f.view.Map.WithMoves(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := next.WithMoves(nil, nil)
	for _, tc := range []struct {
		enc  string
		want string
	}{
		{string(after.Encode()), "0"},
		{string(next.Encode()), "1"},
		{string(next.Encode()), "0"},
		{"{", "(error) ERR shardmap: invalid map: unexpected end of JSON input"},
	} {
		if got := c.do("FLINT.MAPSET", tc.enc).String(); got != tc.want {
			t.Errorf("FLINT.MAPSET of %.40s = %s, want %s", tc.enc, got, tc.want)
		}
	}
	if got, _ := st.Get([]byte(server.MapKey)); string(got) != string(next.Encode()) {
		t.Errorf("the store holds %s, want the map of epoch 2", got)
	}
}

// TestMapSetFirst: a manager started without a map (flint cluster create
// writes it) takes only a map of epoch 1 as the first, once, and says in
// INFO cluster that it holds none until then.
func TestMapSetFirst(t *testing.T) {
	f := newFakeShard(t)
	f.mu.lead = 1
	first := f.view.Map
	f.view = &server.Shards{Group: 0}
	st := store.New(store.Options{})
	f.Local = server.Local{S: st}
	c := dialRaw(t, servertest.StartBackend(t, server.Config{}, f).Addr)
	if got := string(c.do("INFO", "cluster").Str); !strings.Contains(got, "flint_shard_group:0\r\nflint_shard_managers:\r\nflint_shard_epoch:0\r\n") {
		t.Errorf("INFO cluster at a manager with no map = %q", got)
	}
	second, err := first.WithMoves(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		enc  string
		want string
	}{
		{string(second.Encode()), "(error) CLUSTERDOWN The cluster map is not known here yet"},
		{string(first.Encode()), "1"},
		{string(first.Encode()), "0"},
	} {
		if got := c.do("FLINT.MAPSET", tc.enc).String(); got != tc.want {
			t.Errorf("FLINT.MAPSET of epoch %.40s = %s, want %s", tc.enc, got, tc.want)
		}
	}
	if got, _ := st.Get([]byte(server.MapKey)); string(got) != string(first.Encode()) {
		t.Errorf("the store holds %s, want the map of epoch 1", got)
	}
}
