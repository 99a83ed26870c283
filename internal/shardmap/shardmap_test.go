package shardmap

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/flintkv/flint/internal/slot"
)

func members(addrs ...string) []Member {
	ms := make([]Member, len(addrs))
	for i, a := range addrs {
		ms[i] = Member{ID: uint64(i + 1), Addr: a}
	}
	return ms
}

// TestEven splits the slots among 1 to 7 groups: contiguous, in order,
// every slot covered once, sizes differing by at most one.
func TestEven(t *testing.T) {
	for n := 1; n <= 7; n++ {
		var all [][]Member
		for i := range n {
			all = append(all, members(fmt.Sprintf("127.0.0.1:%d", 7000+i)))
		}
		m, err := Even(all)
		if err != nil {
			t.Fatal(err)
		}
		if m.Covered() != slot.Count {
			t.Fatalf("%d groups cover %d slots", n, m.Covered())
		}
		next := 0
		for i, g := range m.Groups {
			r := g.Slots[0]
			size := r.Last - r.First + 1
			if g.ID != uint64(i+1) || len(g.Slots) != 1 || r.First != next || size < slot.Count/n || size > slot.Count/n+1 {
				t.Fatalf("%d groups: group %d = %+v", n, i, g)
			}
			next = r.Last + 1
			if o := m.Owner(r.First); o.ID != g.ID {
				t.Fatalf("slot %d's owner is %d, want %d", r.First, o.ID, g.ID)
			}
		}
	}
	// As redis-cli --cluster create splits 16384 among 3 masters.
	m, _ := Even([][]Member{members("a:1"), members("b:1"), members("c:1")})
	if got := fmt.Sprint(m.Groups[0].Slots, m.Groups[1].Slots, m.Groups[2].Slots); got != "[{0 5460}] [{5461 10922}] [{10923 16383}]" {
		t.Fatalf("3 groups' slots: %s", got)
	}
}

// TestRoundTrip encodes and decodes a map with several ranges per group
// and uncovered slots.
func TestRoundTrip(t *testing.T) {
	m, err := New(7, []Group{
		{ID: 9, Slots: []Range{{100, 200}, {300, 300}}, Members: members("127.0.0.1:1", "127.0.0.1:2")},
		{ID: 2, Slots: []Range{{0, 99}}, Members: members("[::1]:3")},
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(m.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Encode()) != string(m.Encode()) || got.Covered() != 202 || got.Owner(300).ID != 9 || got.Owner(0).ID != 2 || got.Owner(201) != nil {
		t.Fatalf("decoded %s, covering %d", got.Encode(), got.Covered())
	}
	if g := got.Group(9); g == nil || g.Members[1].Addr != "127.0.0.1:2" || got.Group(3) != nil {
		t.Fatalf("Group(9) = %+v", g)
	}
}

// TestInvalid: every malformed map is refused with ErrInvalid.
func TestInvalid(t *testing.T) {
	ok := members("127.0.0.1:1")
	for name, groups := range map[string][]Group{
		"group 0":        {{ID: 0, Members: ok}},
		"twice":          {{ID: 1, Members: ok}, {ID: 1, Members: ok}},
		"no members":     {{ID: 1}},
		"member 0":       {{ID: 1, Members: []Member{{0, "a:1"}}}},
		"member twice":   {{ID: 1, Members: []Member{{1, "a:1"}, {1, "b:1"}}}},
		"bad address":    {{ID: 1, Members: []Member{{1, "nowhere"}}}},
		"slot too high":  {{ID: 1, Members: ok, Slots: []Range{{0, slot.Count}}}},
		"reversed range": {{ID: 1, Members: ok, Slots: []Range{{5, 4}}}},
		"out of order":   {{ID: 1, Members: ok, Slots: []Range{{5, 6}, {0, 1}}}},
		"slot in two":    {{ID: 1, Members: ok, Slots: []Range{{0, 10}}}, {ID: 2, Members: ok, Slots: []Range{{10, 20}}}},
		"negative slot":  {{ID: 1, Members: ok, Slots: []Range{{-1, 3}}}},
	} {
		if _, err := New(1, groups); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: New = %v, want ErrInvalid", name, err)
		}
	}
	for _, b := range []string{`{"version":3,"epoch":1,"groups":[]}`, `{"version":1,"groups":[{"id":0}]}`, `[`, `{"version":1,"groups":[{"id":1,"slots":[[3,1]],"members":[{"id":1,"addr":"a:1"}]}]}`} {
		if _, err := Decode([]byte(b)); !errors.Is(err, ErrInvalid) {
			t.Errorf("Decode(%s) = %v, want ErrInvalid", b, err)
		}
	}
	if _, err := Even(nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("Even(nil) = %v", err)
	}
}

// TestMoves checks a map with a move: its encoding (version 2, and 1
// once the move is gone), and the checks of a move's owner.
func TestMoves(t *testing.T) {
	m, err := Even([][]Member{{{1, "127.0.0.1:1"}}, {{1, "127.0.0.1:2"}}})
	if err != nil {
		t.Fatal(err)
	}
	r := Range{100, 199}
	moving, err := m.WithMoves([]Move{{Slots: r, From: 1, To: 2}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	done, err := moving.WithMoves([]Move{{Slots: r, From: 1, To: 2, Done: true}}, map[Range]uint64{r: 2})
	if err != nil {
		t.Fatal(err)
	}
	if want := []Range{{0, 99}, {200, 8191}}; done.Epoch != 3 || !slices.Equal(done.Group(1).Slots, want) || done.Owner(150).ID != 2 {
		t.Fatalf("after the move: epoch %d, group 1 owns %v, want 3 and %v", done.Epoch, done.Group(1).Slots, want)
	}
	back, err := Decode(done.Encode())
	if err != nil || !slices.Equal(back.Moves, done.Moves) || !strings.Contains(string(done.Encode()), `"version":2`) {
		t.Fatalf("Decode(Encode) = %+v, %v", back, err)
	}
	finished, _ := done.WithMoves(nil, nil)
	if !strings.Contains(string(finished.Encode()), `"version":1`) {
		t.Fatalf("a map without moves encodes as %s, want version 1", finished.Encode())
	}
	if _, err := moving.WithMoves([]Move{{Slots: r, From: 1, To: 2, Done: true}}, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a done move whose slots are still the source's: %v, want ErrInvalid", err)
	}
	if strings.Contains(string(moving.Encode()), "abort") {
		t.Errorf("a move not given up encodes with its abort field: %s", moving.Encode())
	}
	abort, _ := moving.WithMoves([]Move{{Slots: r, From: 1, To: 2, Abort: true}}, nil)
	if back, err := Decode(abort.Encode()); err != nil || !back.Moves[0].Abort || !strings.Contains(string(abort.Encode()), `"version":2`) {
		t.Errorf("Decode(%s) = %+v, %v, want its move's Abort", abort.Encode(), back, err)
	}
}

// TestWithMembers replaces a group's members at the next epoch, leaving
// the original map and the other groups as they were, and refuses an
// unknown group and a group left with no members.
func TestWithMembers(t *testing.T) {
	m, _ := Even([][]Member{members("a:1", "a:2"), members("b:1")})
	three := append(members("a:1", "a:2"), Member{ID: 5, Addr: "a:5"})
	n, err := m.WithMembers(1, three)
	if err != nil {
		t.Fatal(err)
	}
	if n.Epoch != 2 || !slices.Equal(n.Groups[0].Members, three) || !slices.Equal(n.Groups[1].Members, members("b:1")) ||
		n.Owner(0).ID != 1 || len(m.Groups[0].Members) != 2 {
		t.Fatalf("after WithMembers: %+v (before: %+v)", n.Groups, m.Groups)
	}
	for _, bad := range []struct {
		id uint64
		ms []Member
	}{{3, three}, {1, nil}, {1, []Member{{ID: 1, Addr: "garbage"}}}} {
		if _, err := m.WithMembers(bad.id, bad.ms); !errors.Is(err, ErrInvalid) {
			t.Errorf("WithMembers(%d, %v) = %v, want ErrInvalid", bad.id, bad.ms, err)
		}
	}
}
