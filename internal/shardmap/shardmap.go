// Package shardmap is the cluster map of a sharded Flint: which raft group
// owns each of the 16384 hash slots (package slot), which members each
// group has and the addresses clients reach them at, and an epoch that
// only increases as the map changes.
//
// A Map is a value: once built (by New, Even or Decode, which validate it)
// it is not changed, and may be shared between goroutines. A new map is a
// new value with a higher epoch.
//
// # Encoding
//
// A map travels as JSON (Encode, Decode), the same in the meta group's log
// and on the wire between nodes:
//
//	{"version":1,"epoch":3,"groups":[
//	  {"id":1,"slots":[[0,5460]],"members":[{"id":1,"addr":"127.0.0.1:7001"}, ...]},
//	  ...]}
//
// version is the format's; slots are ranges of slots, both ends
// included; member ids are unique within their group. Version 2 adds the
// slot moves under way (see Move), after the groups:
//
//	"moves":[{"slots":[100,200],"from":1,"to":2,"done":false}]
//
// and, in version 2 too, a move that an operator asked to give up
// (`flint cluster move-slots --abort`) carries "abort":true; the field is
// left out otherwise, so that a map without it encodes as before.
//
// Encode writes version 1 when there are none, so that a map without moves
// reads the same to a node that knows only version 1. Decode refuses any
// other version, and a map that New refuses.
package shardmap

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"

	"github.com/flintkv/flint/internal/slot"
)

// MaxGroup is the largest group id: a group's id is in the low 16 bits of
// the client session ids it issues (store.Options.Group).
const MaxGroup = 1<<16 - 1

// Version is the version of the encoding that Encode writes.
const Version = 2

// Map is the cluster map. Use Owner to find a slot's group.
type Map struct {
	Epoch  uint64
	Groups []Group // in order of id
	Moves  []Move  // the slot moves under way, in order of slot
	// owner[s] is the index in Groups of slot s's group, or -1.
	owner [slot.Count]int16
}

// Group is one raft group: the slots it owns and its members.
type Group struct {
	ID      uint64
	Slots   []Range // in order, disjoint
	Members []Member
}

// Range is the slots First to Last, both included.
type Range struct{ First, Last int }

// Move is a slot move under way (docs/SHARDING.md, "Moving slots"): the
// slots go from group From to group To. Until Done, From owns them in the
// map; once Done, To does, and From is deleting its copies of their keys.
// Abort asks the managers, which take the move's steps, to give it up if
// its source still serves the slots (and to finish it otherwise).
type Move struct {
	Slots    Range
	From, To uint64
	Done     bool
	Abort    bool
}

// Member is one member of a group: its id in the group, and the address
// clients reach it at (host:port).
type Member struct {
	ID   uint64
	Addr string
}

// MemberKey names a member of a cluster: its group and its id in the
// group.
type MemberKey struct{ Group, Member uint64 }

// ErrInvalid is wrapped by the errors of New and Decode for a map that is
// not well formed.
var ErrInvalid = errors.New("shardmap: invalid map")

// New returns the map of groups, with moves under way, at epoch, once
// validated: group ids are
// 1 to MaxGroup and unique, every group has members with positive ids unique
// in it and host:port addresses, no slot belongs to two groups, and each
// move is as Move says. Slots may be left without a group (see Covered).
// groups and moves are not retained.
func New(epoch uint64, groups []Group, moves ...Move) (*Map, error) {
	m := &Map{Epoch: epoch, Groups: slices.Clone(groups), Moves: slices.Clone(moves)}
	slices.SortFunc(m.Groups, func(a, b Group) int { return cmp.Compare(a.ID, b.ID) })
	for i := range m.owner {
		m.owner[i] = -1
	}
	for gi, g := range m.Groups {
		if err := checkGroup(g, gi > 0 && m.Groups[gi-1].ID == g.ID); err != nil {
			return nil, err
		}
		for _, r := range g.Slots {
			for s := r.First; s <= r.Last; s++ {
				if m.owner[s] >= 0 {
					return nil, fmt.Errorf("%w: slot %d belongs to groups %d and %d", ErrInvalid, s, m.Groups[m.owner[s]].ID, g.ID)
				}
				m.owner[s] = int16(gi)
			}
		}
	}
	for i, mv := range m.Moves {
		if err := m.checkMove(mv, i); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// checkMove checks move i: its groups exist and differ, the group that
// owns its slots is the one it says, and it comes after the one before.
func (m *Map) checkMove(mv Move, i int) error {
	owner := mv.From
	if mv.Done {
		owner = mv.To
	}
	r := mv.Slots
	switch {
	case mv.From == mv.To || m.Group(mv.From) == nil || m.Group(mv.To) == nil:
		return fmt.Errorf("%w: move of slots %d-%d from group %d to %d", ErrInvalid, r.First, r.Last, mv.From, mv.To)
	case r.First < 0 || r.Last >= slot.Count || r.First > r.Last || i > 0 && r.First <= m.Moves[i-1].Slots.Last:
		return fmt.Errorf("%w: moves' slot ranges bad, out of order or overlapping", ErrInvalid)
	}
	for s := r.First; s <= r.Last; s++ {
		if g := m.Owner(s); g == nil || g.ID != owner {
			return fmt.Errorf("%w: slot %d of a move from group %d to %d is not group %d's", ErrInvalid, s, mv.From, mv.To, owner)
		}
	}
	return nil
}

// checkGroup checks one group, dup saying whether its id came before.
func checkGroup(g Group, dup bool) error {
	switch {
	case g.ID == 0 || g.ID > MaxGroup:
		return fmt.Errorf("%w: group id %d, want 1 to %d", ErrInvalid, g.ID, MaxGroup)
	case dup:
		return fmt.Errorf("%w: group %d appears twice", ErrInvalid, g.ID)
	case len(g.Members) == 0:
		return fmt.Errorf("%w: group %d has no members", ErrInvalid, g.ID)
	}
	for i, mb := range g.Members {
		if mb.ID == 0 || slices.ContainsFunc(g.Members[:i], func(o Member) bool { return o.ID == mb.ID }) {
			return fmt.Errorf("%w: group %d: member id %d is 0 or named twice", ErrInvalid, g.ID, mb.ID)
		}
		if _, port, err := net.SplitHostPort(mb.Addr); err != nil || port == "" {
			return fmt.Errorf("%w: group %d: member %d: bad address %q", ErrInvalid, g.ID, mb.ID, mb.Addr)
		}
	}
	for i, r := range g.Slots {
		if r.First < 0 || r.Last >= slot.Count || r.First > r.Last {
			return fmt.Errorf("%w: group %d: bad slot range %d-%d", ErrInvalid, g.ID, r.First, r.Last)
		}
		if i > 0 && r.First <= g.Slots[i-1].Last {
			return fmt.Errorf("%w: group %d: slot ranges out of order or overlapping", ErrInvalid, g.ID)
		}
	}
	return nil
}

// Even returns the map at epoch 1 of one group per element of members,
// with ids 1, 2, ... in that order, and the slots split evenly among them
// in that order, as redis-cli --cluster create splits them among masters:
// group i ends at round((i+1)*16384/n - 1), the last at 16383.
func Even(members [][]Member) (*Map, error) {
	n := len(members)
	if n == 0 || n > slot.Count {
		return nil, fmt.Errorf("%w: %d groups, want 1 to %d", ErrInvalid, n, slot.Count)
	}
	groups := make([]Group, n)
	per, first := float64(slot.Count)/float64(n), 0
	for i, ms := range members {
		last := int(math.Round(float64(i)*per + per - 1))
		if i == n-1 {
			last = slot.Count - 1
		}
		groups[i] = Group{ID: uint64(i + 1), Slots: []Range{{first, last}}, Members: ms}
		first = last + 1
	}
	return New(1, groups)
}

// Owner returns the group that owns slot s, or nil if none does.
func (m *Map) Owner(s int) *Group {
	if i := m.owner[s]; i >= 0 {
		return &m.Groups[i]
	}
	return nil
}

// Group returns the group with id, or nil.
func (m *Map) Group(id uint64) *Group {
	i, ok := slices.BinarySearchFunc(m.Groups, id, func(g Group, id uint64) int { return cmp.Compare(g.ID, id) })
	if !ok {
		return nil
	}
	return &m.Groups[i]
}

// Covered reports how many slots have a group: a cluster serves every key
// only when all slot.Count do.
func (m *Map) Covered() int {
	n := 0
	for _, i := range m.owner {
		if i >= 0 {
			n++
		}
	}
	return n
}

// Member returns the member with id, or false.
func (g *Group) Member(id uint64) (Member, bool) {
	i := slices.IndexFunc(g.Members, func(m Member) bool { return m.ID == id })
	if i < 0 {
		return Member{}, false
	}
	return g.Members[i], true
}

// wire is the JSON form of a map.
type wire struct {
	Version int         `json:"version"`
	Epoch   uint64      `json:"epoch"`
	Groups  []wireGroup `json:"groups"`
	Moves   []wireMove  `json:"moves,omitempty"`
}

type wireMove struct {
	Slots [2]int `json:"slots"`
	From  uint64 `json:"from"`
	To    uint64 `json:"to"`
	Done  bool   `json:"done"`
	Abort bool   `json:"abort,omitempty"`
}

type wireGroup struct {
	ID      uint64       `json:"id"`
	Slots   [][2]int     `json:"slots"`
	Members []wireMember `json:"members"`
}

type wireMember struct {
	ID   uint64 `json:"id"`
	Addr string `json:"addr"`
}

// Encode returns m's encoding.
func (m *Map) Encode() []byte {
	w := wire{Version: 1, Epoch: m.Epoch, Groups: make([]wireGroup, len(m.Groups))}
	for _, mv := range m.Moves {
		w.Version = Version
		w.Moves = append(w.Moves, wireMove{Slots: [2]int{mv.Slots.First, mv.Slots.Last}, From: mv.From, To: mv.To, Done: mv.Done, Abort: mv.Abort})
	}
	for i, g := range m.Groups {
		wg := wireGroup{ID: g.ID, Slots: make([][2]int, len(g.Slots)), Members: make([]wireMember, len(g.Members))}
		for j, r := range g.Slots {
			wg.Slots[j] = [2]int{r.First, r.Last}
		}
		for j, mb := range g.Members {
			wg.Members[j] = wireMember(mb)
		}
		w.Groups[i] = wg
	}
	b, err := json.Marshal(w)
	if err != nil {
		panic("shardmap: " + err.Error()) // plain types: it cannot fail
	}
	return b
}

// Decode returns the map that b encodes, validated as New does.
func Decode(b []byte) (*Map, error) {
	var w wire
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if w.Version != 1 && w.Version != Version || w.Version == 1 && len(w.Moves) > 0 {
		return nil, fmt.Errorf("%w: format version %d, want 1 or %d", ErrInvalid, w.Version, Version)
	}
	groups := make([]Group, len(w.Groups))
	for i, wg := range w.Groups {
		g := Group{ID: wg.ID, Slots: make([]Range, len(wg.Slots)), Members: make([]Member, len(wg.Members))}
		for j, r := range wg.Slots {
			g.Slots[j] = Range{r[0], r[1]}
		}
		for j, mb := range wg.Members {
			g.Members[j] = Member(mb)
		}
		groups[i] = g
	}
	moves := make([]Move, len(w.Moves))
	for i, mv := range w.Moves {
		moves[i] = Move{Slots: Range{mv.Slots[0], mv.Slots[1]}, From: mv.From, To: mv.To, Done: mv.Done, Abort: mv.Abort}
	}
	return New(w.Epoch, groups, moves...)
}

// WithMoves returns a copy of m at the next epoch with moves as its
// moves and the slots of each range in give given to its group, once
// validated as New does.
func (m *Map) WithMoves(moves []Move, give map[Range]uint64) (*Map, error) {
	groups := make([]Group, len(m.Groups))
	for i, g := range m.Groups {
		var owned []Range
		for _, r := range g.Slots {
			for s := r.First; s <= r.Last; s++ {
				if _, taken := rangeOf(give, s); taken {
					continue
				}
				owned = addSlot(owned, s)
			}
		}
		for r, to := range give {
			if to == g.ID {
				for s := r.First; s <= r.Last; s++ {
					owned = addSlot(owned, s)
				}
			}
		}
		slices.SortFunc(owned, func(a, b Range) int { return cmp.Compare(a.First, b.First) })
		g.Slots, g.Members = mergeRanges(owned), slices.Clone(g.Members)
		groups[i] = g
	}
	return New(m.Epoch+1, groups, moves...)
}

// rangeOf returns the range of give that holds slot s, if one does.
func rangeOf(give map[Range]uint64, s int) (Range, bool) {
	for r := range give {
		if s >= r.First && s <= r.Last {
			return r, true
		}
	}
	return Range{}, false
}

// addSlot adds slot s to rs, extending the last range if s follows it.
func addSlot(rs []Range, s int) []Range {
	if n := len(rs); n > 0 && rs[n-1].Last == s-1 {
		rs[n-1].Last = s
		return rs
	}
	return append(rs, Range{s, s})
}

// mergeRanges joins the adjacent ranges of rs, which are sorted and
// disjoint.
func mergeRanges(rs []Range) []Range {
	var out []Range
	for _, r := range rs {
		if n := len(out); n > 0 && out[n-1].Last == r.First-1 {
			out[n-1].Last = r.Last
			continue
		}
		out = append(out, r)
	}
	return out
}

// WithGroup returns a copy of m at the next epoch with group g added (its
// slots, if any, must be no other group's), once validated as New does.
func (m *Map) WithGroup(g Group) (*Map, error) {
	return New(m.Epoch+1, append(slices.Clone(m.Groups), g), m.Moves...)
}

// WithMembers returns a copy of m at the next epoch in which group id has
// members, once validated as New does; it fails if m has no group id.
func (m *Map) WithMembers(id uint64, members []Member) (*Map, error) {
	groups := slices.Clone(m.Groups)
	i := slices.IndexFunc(groups, func(g Group) bool { return g.ID == id })
	if i < 0 {
		return nil, fmt.Errorf("%w: no group %d", ErrInvalid, id)
	}
	groups[i].Members = slices.Clone(members)
	return New(m.Epoch+1, groups, m.Moves...)
}

// Count returns how many slots g owns.
func (g *Group) Count() int {
	n := 0
	for _, r := range g.Slots {
		n += r.Last - r.First + 1
	}
	return n
}

// Top returns the ranges of g's last n slots (all of them if it has fewer),
// in order.
func (g *Group) Top(n int) []Range {
	var out []Range
	for i := len(g.Slots) - 1; i >= 0 && n > 0; i-- {
		r := g.Slots[i]
		k := min(n, r.Last-r.First+1)
		out = append([]Range{{r.Last - k + 1, r.Last}}, out...)
		n -= k
	}
	return out
}
