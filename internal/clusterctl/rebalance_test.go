package clusterctl

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/flintkv/flint/internal/shardmap"
)

// TestNextRebalance checks the steps of a rebalance of three groups that
// own 4096, 8192 and 4096 slots: from the group over its share to the one
// most under its, until each has its share, the first the one more.
func TestNextRebalance(t *testing.T) {
	one := []shardmap.Member{{ID: 1, Addr: "127.0.0.1:1"}}
	m, err := shardmap.New(1, []shardmap.Group{
		{ID: 1, Slots: []shardmap.Range{{First: 0, Last: 4095}}, Members: one},
		{ID: 2, Slots: []shardmap.Range{{First: 8192, Last: 16383}}, Members: one},
		{ID: 3, Slots: []shardmap.Range{{First: 4096, Last: 8191}}, Members: one},
	})
	if err != nil {
		t.Fatal(err)
	}
	var steps [][3]int
	for range 5 {
		from, to, n := nextRebalance(m)
		if n == 0 {
			break
		}
		steps = append(steps, [3]int{int(from), int(to), n})
		r := m.Group(from).Top(n)
		if m, err = m.WithMoves(nil, map[shardmap.Range]uint64{r[len(r)-1]: to}); err != nil {
			t.Fatal(err)
		}
	}
	want := [][3]int{{2, 1, 1366}, {2, 3, 1365}}
	if len(steps) != len(want) || steps[0] != want[0] || steps[1] != want[1] {
		t.Fatalf("steps %v, want %v", steps, want)
	}
	for id, n := range map[uint64]int{1: 5462, 2: 5461, 3: 5461} {
		if got := m.Group(id).Count(); got != n {
			t.Errorf("group %d owns %d slots, want %d", id, got, n)
		}
	}
}

// TestPlanMoves checks that a range is cut into one move per owner.
func TestPlanMoves(t *testing.T) {
	m, err := shardmap.Even([][]shardmap.Member{{{ID: 1, Addr: "a:1"}}, {{ID: 1, Addr: "a:2"}}, {{ID: 1, Addr: "a:3"}}})
	if err != nil {
		t.Fatal(err)
	}
	got := planMoves(m, 5000, 11000, 2)
	want := []shardmap.Move{{Slots: shardmap.Range{First: 5000, Last: 5460}, From: 1, To: 2}, {Slots: shardmap.Range{First: 10923, Last: 11000}, From: 3, To: 2}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("planMoves = %+v, want %+v", got, want)
	}
}

// TestSplitDone: AddGroup run again without a group to take slots from
// finds the split done only if the new group is in the map with the
// members asked for, owns slots, and none moves to or from it.
func TestSplitDone(t *testing.T) {
	one := []shardmap.Member{{ID: 1, Addr: "127.0.0.1:1"}}
	three := []shardmap.Member{{ID: 1, Addr: "127.0.0.1:3"}}
	split, err := shardmap.New(4, []shardmap.Group{
		{ID: 1, Slots: []shardmap.Range{{First: 0, Last: 4095}}, Members: one},
		{ID: 2, Slots: []shardmap.Range{{First: 8192, Last: 16383}}, Members: one},
		{ID: 3, Slots: []shardmap.Range{{First: 4096, Last: 8191}}, Members: three},
	})
	if err != nil {
		t.Fatal(err)
	}
	added, err := split.WithMoves(nil, map[shardmap.Range]uint64{{First: 4096, Last: 8191}: 1})
	if err != nil {
		t.Fatal(err)
	}
	moving, err := shardmap.New(5, split.Groups, shardmap.Move{Slots: shardmap.Range{First: 4000, Last: 4095}, From: 1, To: 3})
	if err != nil {
		t.Fatal(err)
	}
	other := []shardmap.Member{{ID: 1, Addr: "127.0.0.1:4"}}
	for _, c := range []struct {
		name    string
		m       *shardmap.Map
		members []shardmap.Member
		from    uint64
		done    bool
	}{
		{"done", split, three, 0, true},
		{"asked to take from group 1", split, three, 1, false},
		{"other members", split, other, 0, false},
		{"no slots yet", added, three, 0, false},
		{"a move to it under way", moving, three, 0, false},
	} {
		err := splitDone(c.m, 3, c.members, c.from)
		if got := errors.Is(err, ErrSplitDone); got != c.done || got != (err != nil) {
			t.Errorf("%s: splitDone = %v, want done %v", c.name, err, c.done)
		}
	}
	if err := splitDone(split, 3, three, 0); err == nil || !strings.Contains(err.Error(), "group 3 is in the map already, with these members, and owns 4096 slots") {
		t.Errorf("splitDone says %v", err)
	}
}

// TestRequest checks which moves a move-slots records given the moves
// the map lists: a run again of the same command (its own moves listed,
// or part of them) adds the rest, and any other move listed refuses it
// with a MoveInProgressError that names that move.
func TestRequest(t *testing.T) {
	m, err := shardmap.Even([][]shardmap.Member{{{ID: 1, Addr: "a:1"}}, {{ID: 1, Addr: "a:2"}}, {{ID: 1, Addr: "a:3"}}})
	if err != nil {
		t.Fatal(err)
	}
	mv := func(first, last int, from, to uint64) shardmap.Move {
		return shardmap.Move{Slots: shardmap.Range{First: first, Last: last}, From: from, To: to}
	}
	aborting := mv(5000, 5099, 1, 2)
	aborting.Abort = true
	for _, tc := range []struct {
		listed      []shardmap.Move
		first, last int
		to          uint64
		want        []shardmap.Move
		refused     string // the refusal's message, if refused
	}{
		{nil, 5000, 11000, 2, []shardmap.Move{mv(5000, 5460, 1, 2), mv(10923, 11000, 3, 2)}, ""},
		{[]shardmap.Move{mv(5000, 5099, 1, 2)}, 5000, 11000, 2,
			[]shardmap.Move{mv(5000, 5099, 1, 2), mv(5100, 5460, 1, 2), mv(10923, 11000, 3, 2)}, ""},
		{[]shardmap.Move{mv(5000, 5460, 1, 2), mv(10923, 11000, 3, 2)}, 5000, 11000, 2,
			[]shardmap.Move{mv(5000, 5460, 1, 2), mv(10923, 11000, 3, 2)}, ""},
		{[]shardmap.Move{mv(100, 199, 1, 2)}, 5000, 11000, 2, nil,
			"clusterctl: a move of slots 100-199 to group 2 is in progress: wait for it to end, or give it up (flint cluster move-slots --abort)"},
		{[]shardmap.Move{mv(5000, 5099, 1, 3)}, 5000, 11000, 2, nil, "clusterctl: a move of slots 5000-5099 to group 3 is in progress"},
		{[]shardmap.Move{mv(4000, 5099, 1, 2)}, 5000, 11000, 2, nil, "clusterctl: a move of slots 4000-5099 to group 2 is in progress"},
		{[]shardmap.Move{aborting}, 5000, 11000, 2, nil, "clusterctl: a move of slots 5000-5099 to group 2 is being given up"},
	} {
		cur, err := m.WithMoves(tc.listed, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := request(cur, tc.first, tc.last, tc.to)
		var refused *MoveInProgressError
		switch {
		case tc.refused != "" && (!errors.As(err, &refused) || !strings.HasPrefix(err.Error(), tc.refused)):
			t.Errorf("request(%v, %d-%d to %d) = %v, want refused: %q", tc.listed, tc.first, tc.last, tc.to, err, tc.refused)
		case tc.refused == "" && (err != nil || !slices.Equal(got, tc.want)):
			t.Errorf("request(%v, %d-%d to %d) = %v, %v, want %v", tc.listed, tc.first, tc.last, tc.to, got, err, tc.want)
		}
	}
}
