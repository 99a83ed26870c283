package replica

import (
	"errors"
	"testing"
)

// TestSnapshotRetries checks the waits before a failed snapshot stream is
// reported: about snapshotRetryMin after the first failure in a row,
// doubling up to snapshotRetryMax, none after a success, for each member
// on its own.
func TestSnapshotRetries(t *testing.T) {
	var s snapshotRetries
	failed := errors.New("refused")
	want := snapshotRetryMin
	for range 10 {
		if d := s.after(2, failed); d < want/2 || d > want {
			t.Fatalf("wait %v after a failure, want %v to %v", d, want/2, want)
		}
		want = min(2*want, snapshotRetryMax)
	}
	if d := s.after(3, failed); d > snapshotRetryMin {
		t.Fatalf("member 3's first failure waits %v, want at most %v", d, snapshotRetryMin)
	}
	if d := s.after(2, nil); d != 0 {
		t.Fatalf("a success waits %v", d)
	}
	if d := s.after(2, failed); d > snapshotRetryMin {
		t.Fatalf("the first failure after a success waits %v, want at most %v", d, snapshotRetryMin)
	}
}
