package hostgroup

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/flintkv/flint/internal/batchentry"
	"github.com/flintkv/flint/internal/store"
)

// applyBatch applies, at index, an entry of the one batch that fill makes.
func applyBatch(sm *StateMachine, index uint64, fill func(b *store.Batch)) {
	var b store.Batch
	fill(&b)
	sm.Apply(index, batchentry.Append(batchentry.AppendHeader(nil, time.Now().UnixNano(), 1), 0, b.Bytes()))
}

// TestRestoreLarge restores a snapshot of 8 MiB, many times the frame
// that Restore holds at a time (snap.ReadFrom, whose test bounds how far
// it reads ahead), read in small pieces. The same snapshot cut short, or
// with a byte flipped, fails Restore with an error that says so, and the
// state machine keeps its state.
func TestRestoreLarge(t *testing.T) {
	sm := NewStateMachine(store.Options{})
	val := func(i int) []byte { return bytes.Repeat([]byte{byte(i), byte(i >> 8)}, 2<<10) }
	for i := range 8 {
		applyBatch(sm, uint64(i+1), func(b *store.Batch) {
			for k := i * 256; k < (i+1)*256; k++ {
				b.Add(store.OpSet, 0, []byte(fmt.Sprintf("k%05d", k)), val(k))
			}
		})
	}
	write, err := sm.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()

	got := NewStateMachine(store.Options{})
	applyBatch(got, 20, func(b *store.Batch) { b.Add(store.OpSet, 0, []byte("before"), []byte("x")) })
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 1
	for name, bad := range map[string][]byte{"cut short": good[:len(good)-100], "damaged": flipped} {
		err := got.Restore(bytes.NewReader(bad))
		if err == nil || !strings.Contains(err.Error(), "snapshot stream at offset") {
			t.Fatalf("Restore of a snapshot %s: %v, want the offset of the damage", name, err)
		}
		if v, ok := got.Store().Get([]byte("before")); !ok || string(v) != "x" || got.Store().Len() != 1 || got.Applied() != 20 {
			t.Fatalf("a failed Restore (%s) changed the state: %d keys, applied %d", name, got.Store().Len(), got.Applied())
		}
	}

	if err := got.Restore(iotest.HalfReader(bytes.NewReader(good))); err != nil {
		t.Fatal(err)
	}
	if got.Applied() != 8 || got.Store().Len() != 2048 {
		t.Fatalf("restored %d keys at index %d, want 2048 at 8", got.Store().Len(), got.Applied())
	}
	for k := range 2048 {
		if v, ok := got.Store().Get([]byte(fmt.Sprintf("k%05d", k))); !ok || !bytes.Equal(v, val(k)) {
			t.Fatalf("k%05d restored as %d bytes, %v", k, len(v), ok)
		}
	}
}
