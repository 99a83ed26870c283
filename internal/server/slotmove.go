package server

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/flintkv/flint/internal/protocol"
	"github.com/flintkv/flint/internal/shardmap"
	"github.com/flintkv/flint/internal/slot"
	"github.com/flintkv/flint/internal/store"
)

// Slot moves (docs/SHARDING.md, "Moving slots"). While a range of slots
// moves from a source group to a target group, each group's store holds a
// record of where the move stands in it (store.SlotMove), which every
// member applied from its log; a member routes a command on such a slot
// by that record before the map:
//
//   - Open (the target, once every key arrived and the source is Gone):
//     served here, whatever the map this member last learned says;
//   - Gone, or Dropped while this member's map is older than the record's
//     epoch (the source): -ASK <slot> to the target's leader;
//   - Leaving (the source): reads served, writes -TRYAGAIN;
//   - Importing, in a group the map gives the slot, or to a command after
//     ASKING: -TRYAGAIN (not -MOVED back to the source, which answers ASK
//     from Gone on: the client waits before it asks again, rather than
//     bouncing between the two until the target is Open).
//
// A write that passed routing and reaches the store after the source's
// Leaving is refused there (store.ErrSlotMoving, -TRYAGAIN); a read checks
// the record again after it read (readNow, read, lookDeferred), so that
// no member answers a read on a slot after its move made it Gone.
//
// The target serves an Open slot with or without ASKING, since the source
// serves it no more.

// tryAgain is the reply to a command on a slot that is moving.
const tryAgain = "TRYAGAIN the key's slot is moving to another group; try again"

// ask is Redis Cluster's redirection of one command on a key of slot s, a
// slot that is moving, to the member at addr.
func ask(s int, addr string) string { return fmt.Sprintf("ASK %d %s", s, addr) }

// moveRoute returns the reply to a command on slot s, whose owner in the
// map sh is g (nil if none), as its move record here says: "" if it is
// served here, and whether the record decided; if not, the map does.
func (c *conn) moveRoute(sh *Shards, g *shardmap.Group, write bool, s int) (string, bool) {
	m, ok := c.srv.kv.Store().SlotMoveOf(s)
	if !ok {
		return "", false
	}
	switch {
	case m.Phase == store.Open:
		return "", true
	case m.Phase == store.Gone || m.Phase == store.Dropped && sh.Map.Epoch < m.Epoch:
		if p := sh.Map.Group(m.Peer); p != nil {
			return ask(s, sh.leaderAddr(p)), true
		}
		return tryAgain, true
	case m.Phase == store.Importing && c.asked:
		return tryAgain, true
	case g == nil || g.ID != sh.Group:
		return "", false
	case m.Phase == store.Importing || m.Phase == store.Leaving && write:
		return tryAgain, true
	}
	return "", false
}

// movedAway replies, and reports true, if the slot of the command being
// run (c.keySlot) is no longer served here by its move record: for a read
// to check after it read.
func (c *conn) movedAway() bool {
	if c.keySlot < 0 || len(c.srv.kv.Store().SlotMoves()) == 0 {
		return false
	}
	sh := c.srv.sharded.Shards()
	msg, _ := c.moveRoute(sh, sh.Map.Owner(c.keySlot), false, c.keySlot)
	if msg == "" {
		return false
	}
	c.err(msg)
	return true
}

// movingLookup reports, on the apply thread, whether a deferred read of
// keys must not be answered from this store: its slot's record says it is
// not served here now.
func (c *conn) movingLookup(s *store.Store, keys [][]byte) bool {
	if c.srv.sharded == nil || len(keys) == 0 || len(s.SlotMoves()) == 0 {
		return false
	}
	m, ok := s.SlotMoveOf(slot.Of(keys[0]))
	return ok && m.Phase != store.Open && m.Phase != store.Leaving
}

// rangeMoving answers a RANGE -TRYAGAIN, and reports true, unless this
// member holds every key of the slots its map gives its group, as the
// records of s, read after the RANGE's pairs, say: not while a slot is
// Importing here (its keys are not all here yet), Gone from here (its keys
// are at the target, which the map may not name yet), or Dropped at a map
// epoch later than this member's map (its keys were deleted here, and the
// map it would give a client names this group for them). A client that
// checks, after RANGE, that the member's map is the one it planned in
// then knows it had every key (see docs/SHARDING.md, "RANGE across
// groups").
func (c *conn) rangeMoving(s *store.Store) bool {
	ms := s.SlotMoves()
	if c.srv.sharded == nil || len(ms) == 0 {
		return false
	}
	var epoch uint64
	if sh := c.srv.sharded.Shards(); sh != nil && sh.Map != nil {
		epoch = sh.Map.Epoch
	}
	for _, m := range ms {
		if m.Phase == store.Importing || m.Phase == store.Gone || m.Phase == store.Dropped && epoch < m.Epoch {
			c.err(tryAgain)
			return true
		}
	}
	return false
}

// slotsCmd is FLINT.SLOTS, the steps of a slot move that a data group
// takes (see store.SlotMove), sent by `flint cluster move-slots` to the
// group's leader. Slots are numbers, groups ids:
//
//	LEAVE first last target          log Leaving: writes refused from now on; 1 if done
//	GONE first last target           log Gone: every key is at the target
//	DROP first last peer epoch       log the deletion of the slots' keys; Dropped from epoch (0: no record)
//	IMPORT first last source k v d ... log Importing and the keys, with their deadlines d (Unix ms, 0: none)
//	OPEN first last source           log Open: the target serves the slots
//	STAY first last target           log the end of Leaving: a move given up before Gone
//	SESSIONS-IMPORT data             log the merge of exported sessions
//	EXPORT first last after count    the slots' keys after key after ("" first): [next, [k, v, d, ...]]
//	SESSIONS after count             exported sessions above id after: [next, data]
//	STATUS                           the records: [[first, last, phase, peer, epoch], ...]
//	FENCE term step ...              step, a logged one, unless a later term's came first
//
// The logged steps reply 1 when applied and 0 when the records refuse them
// (the step was taken already, or is out of turn). A logged step may be
// prefixed with FENCE term (FLINT.SLOTS FENCE 7 LEAVE 0 99 2): the managers'
// leader sends its meta group's term, and the group takes the step only if
// no step of a later term came before it (store.OpSlotsFenced), else
// replies 0.
func (c *conn) slotsCmd(args [][]byte) {
	term, fenced, ok := slotsFence(args)
	if !ok {
		c.err("ERR FLINT.SLOTS FENCE takes a term, an integer, and a logged step: LEAVE, GONE, DROP, IMPORT, OPEN, STAY or SESSIONS-IMPORT")
		return
	}
	if fenced {
		args = append([][]byte{args[0]}, args[3:]...)
	}
	write := func(op store.Op, args ...[]byte) {
		if fenced {
			op, args = store.OpSlotsFenced, store.Fenced(term, op, args...)
		}
		c.write(op, 0, replyBool, args...)
	}
	sub := strings.ToLower(string(args[1]))
	ops := map[string]store.Op{"leave": store.OpSlotsLeave, "gone": store.OpSlotsGone, "drop": store.OpSlotsDrop,
		"import": store.OpSlotsImport, "open": store.OpSlotsOpen, "stay": store.OpSlotsStay}
	arity := map[string]int{"leave": 5, "gone": 5, "drop": 6, "open": 5, "stay": 5, "export": 6, "sessions": 4, "status": 2, "sessions-import": 3}
	want, known := arity[sub]
	switch {
	case sub == "import":
		known, want = true, len(args)
		if len(args) < 5 || (len(args)-5)%3 != 0 {
			want = -1
		}
	case !known:
		c.err(fmt.Sprintf("ERR unknown subcommand '%s'. Try LEAVE, GONE, DROP, IMPORT, OPEN, STAY, SESSIONS-IMPORT, EXPORT, SESSIONS or STATUS.", args[1]))
		return
	}
	if len(args) != want {
		c.errArity("flint.slots|" + sub)
		return
	}
	if c.srv.sharded == nil {
		c.err("ERR This instance is not a node of a sharded cluster")
		return
	}
	switch sub {
	case "status":
		c.slotsStatus()
	case "sessions-import":
		write(store.OpSessionsImport, args[2])
	case "sessions":
		c.exportSessions(args[2:])
	case "export":
		c.exportSlots(args[2:])
	default:
		n := 5 + b2i(sub == "drop")
		nums, ok := slotsArgs(args[2:n])
		if !ok {
			c.err("ERR slots must be 0 to 16383, first at most last, and groups and epochs integers")
			return
		}
		keys, ok := importArgs(args[n:], args[2], args[3])
		if !ok {
			c.err("ERR FLINT.SLOTS IMPORT takes keys of its slots only, each with its value and deadline (Unix ms, 0 for none)")
			return
		}
		write(ops[sub], append(nums, keys...)...)
	}
}

// slotsFence returns the term of FLINT.SLOTS FENCE term step ..., and
// whether args has that prefix; ok is false if the prefix is malformed or
// not followed by a logged step.
func slotsFence(args [][]byte) (term uint64, fenced, ok bool) {
	if !strings.EqualFold(string(args[1]), "fence") {
		return 0, false, true
	}
	if len(args) < 4 {
		return 0, true, false
	}
	term, err := strconv.ParseUint(string(args[2]), 10, 64)
	logged := []string{"leave", "gone", "drop", "import", "open", "stay", "sessions-import"}
	return term, true, err == nil && slices.Contains(logged, strings.ToLower(string(args[3])))
}

// importArgs returns IMPORT's triples of key, value and deadline (decimal
// Unix ms) with the deadlines encoded as store.DeadlineArg, and reports
// whether every key is in the slots first to last (decimal, valid) and
// every deadline a non-negative integer.
func importArgs(args [][]byte, first, last []byte) ([][]byte, bool) {
	f, _ := strconv.Atoi(string(first))
	l, _ := strconv.Atoi(string(last))
	out := make([][]byte, len(args))
	for i := 0; i+2 < len(args); i += 3 {
		at, err := strconv.ParseInt(string(args[i+2]), 10, 64)
		if s := slot.Of(args[i]); s < f || s > l || err != nil || at < 0 {
			return nil, false
		}
		out[i], out[i+1], out[i+2] = args[i], args[i+1], store.DeadlineArg(at)
	}
	return out, true
}

// slotsArgs parses first, last and the numbers after them, encoded as
// store.Uint64Arg, and reports whether they are valid.
func slotsArgs(args [][]byte) ([][]byte, bool) {
	out := make([][]byte, len(args))
	var nums [2]uint64
	for i, a := range args {
		n, err := strconv.ParseUint(string(a), 10, 64)
		if err != nil {
			return nil, false
		}
		if i < 2 {
			nums[i] = n
		}
		out[i] = store.Uint64Arg(n)
	}
	return out, nums[0] <= nums[1] && nums[1] < slot.Count
}

// slotsStatus replies to FLINT.SLOTS STATUS.
func (c *conn) slotsStatus() {
	st, ok := c.read()
	if !ok {
		return
	}
	ms := st.SlotMoves()
	c.out = protocol.AppendArray(c.out, len(ms))
	for _, m := range ms {
		c.out = protocol.AppendArray(c.out, 5)
		c.int(int64(m.First))
		c.int(int64(m.Last))
		c.bulkString(m.Phase.String())
		c.int(int64(m.Peer))
		c.int(int64(m.Epoch))
	}
}

// maxExport bounds the bytes of keys and values that one FLINT.SLOTS
// EXPORT or SESSIONS replies with (but for one pair or session, whatever
// its size), so that the IMPORT that carries them is a log entry of about
// that size.
const maxExport = 1 << 20

// exportSlots replies to FLINT.SLOTS EXPORT first last after count: up to
// count keys, each with its value and deadline (Unix ms, 0 for none), and
// about maxExport bytes of them, read linearizably, and the key to ask
// after next ("" once there are no more).
func (c *conn) exportSlots(args [][]byte) {
	first, err1 := strconv.Atoi(string(args[0]))
	last, err2 := strconv.Atoi(string(args[1]))
	count, err3 := strconv.Atoi(string(args[3]))
	if err1 != nil || err2 != nil || err3 != nil || first < 0 || first > last || last >= slot.Count || count <= 0 {
		c.err("ERR FLINT.SLOTS EXPORT takes first and last slots and a positive count")
		return
	}
	st, ok := c.read()
	if !ok {
		return
	}
	var keys [][]byte // triples: key, value, deadline
	next, size := "", 0
	st.SlotKeys(first, last, args[2], func(k string, v []byte) bool {
		if len(keys) == 3*count || size >= maxExport {
			next = string(keys[len(keys)-3])
			return false
		}
		at, has, found := st.TTL([]byte(k)) // the slot is Leaving: it does not change
		if !found {
			return true // expired meanwhile
		}
		if !has {
			at = 0
		}
		keys = append(keys, []byte(k), v, strconv.AppendInt(nil, at, 10))
		size += len(k) + len(v)
		return true
	})
	c.out = protocol.AppendArray(c.out, 2)
	c.bulkString(next)
	c.out = protocol.AppendArray(c.out, len(keys))
	for _, b := range keys {
		c.out = protocol.AppendBulk(c.out, b)
	}
}

// exportSessions replies to FLINT.SLOTS SESSIONS after count, read
// linearizably: the cursor of the next call (after, once there are no
// more) and the sessions, as store.ExportSessions encodes them.
func (c *conn) exportSessions(args [][]byte) {
	after, err1 := strconv.ParseUint(string(args[0]), 10, 64)
	count, err2 := strconv.Atoi(string(args[1]))
	if err1 != nil || err2 != nil || count <= 0 {
		c.err("ERR FLINT.SLOTS SESSIONS takes a client id and a positive count")
		return
	}
	st, ok := c.read()
	if !ok {
		return
	}
	b, next := st.ExportSessions(after, count, maxExport)
	c.out = protocol.AppendArray(c.out, 2)
	c.int(int64(next))
	c.out = protocol.AppendBulk(c.out, b)
}

// MapKey is the key under which a replicated meta group's store holds the
// cluster map's encoding.
const MapKey = "flint:map"

// mapSetCmd is FLINT.MAPSET <map>, at a manager: make the encoded map the
// cluster's, through the meta group's log, if its epoch is one more than
// the current map's (read linearizably); 1 if it did, 0 if the map
// changed meanwhile (read it again and retry). While the meta group holds
// no map (its managers were started without one), only a map of epoch 1
// is taken, with SET NX: of two first maps written at once, one wins and
// the other gets 0. The managers' FLINT.MAP and the data nodes follow it
// within their polls.
func (c *conn) mapSetCmd(args [][]byte) {
	if sh := c.shards(); sh == nil || sh.Group != 0 {
		c.err("ERR FLINT.MAPSET is for the managers of a sharded cluster")
		return
	}
	next, err := shardmap.Decode(args[1])
	if err != nil {
		c.err("ERR " + err.Error())
		return
	}
	st, ok := c.read()
	if !ok {
		return
	}
	cur, found := st.Get([]byte(MapKey))
	switch {
	case !found && next.Epoch == 1:
		c.write(store.OpSet, store.SetNX, replyBool, []byte(MapKey), args[1])
		return
	case !found:
		c.err("CLUSTERDOWN The cluster map is not known here yet")
		return
	}
	m, err := shardmap.Decode(cur)
	if err != nil {
		c.err("ERR the meta group's map does not decode: " + err.Error())
		return
	}
	if next.Epoch != m.Epoch+1 {
		c.int(0)
		return
	}
	c.write(store.OpCAS, 0, replyBool, []byte(MapKey), cur, args[1])
}

// shards returns the member's view of the cluster map, or nil.
func (c *conn) shards() *Shards {
	if c.srv.sharded == nil {
		return nil
	}
	return c.srv.sharded.Shards()
}
