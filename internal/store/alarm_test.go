package store

import (
	"math"
	"testing"
)

// TestDeadlineSet checks that DeadlineSet wakes its waiter for a deadline
// earlier than NextDeadline last returned, and only then.
func TestDeadlineSet(t *testing.T) {
	s := New(Options{Stripes: 4})
	index := uint64(0)
	apply := func(op Op, args ...[]byte) {
		t.Helper()
		var b Batch
		b.Add(op, 0, args...)
		index++
		if err := s.ApplyBatchAt(b.Bytes(), Stamp{Index: index, Time: 1000e6}, nil); err != nil {
			t.Fatal(err)
		}
	}
	woken := func() bool {
		select {
		case <-s.DeadlineSet():
			return true
		default:
			return false
		}
	}
	if got := s.NextDeadline(); got != math.MaxInt64 || woken() {
		t.Fatalf("an empty store: NextDeadline %d, woken %v; want none, no wake-up", got, woken())
	}
	apply(OpSet, []byte("forever"), []byte("v"))
	if woken() {
		t.Error("a key without a deadline woke the waiter")
	}
	steps := []struct {
		key  string
		at   int64
		wake bool  // the deadline is earlier than the waiter knows of
		next int64 // NextDeadline after it
	}{
		{"a", 5000, true, 5000},
		{"b", 6000, false, 5000},
		{"c", 5000, false, 5000},
		{"d", 4000, true, 4000},
		{"d", 7000, false, 5000}, // d's later deadline replaces its earlier one
		{"e", 3000, true, 3000},
	}
	for _, st := range steps {
		apply(OpSetExpire, []byte(st.key), []byte("v"), DeadlineArg(st.at))
		if w := woken(); w != st.wake {
			t.Errorf("%s at %d: woken %v, want %v", st.key, st.at, w, st.wake)
		}
		if got := s.NextDeadline(); got != st.next {
			t.Errorf("%s at %d: NextDeadline %d, want %d", st.key, st.at, got, st.next)
		}
	}
	apply(OpPersist, []byte("e"))
	if got := s.NextDeadline(); got != 5000 {
		t.Errorf("after PERSIST e: NextDeadline %d, want 5000", got)
	}
	s.Replaced()
	if !woken() {
		t.Error("Replaced did not wake the waiter")
	}
}
