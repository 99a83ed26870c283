package replica

import (
	"fmt"
	"testing"

	"github.com/flintkv/flint/internal/snap"
	"github.com/flintkv/flint/internal/store"
	"github.com/flintkv/flint/internal/vfs"
	"go.etcd.io/raft/v3/raftpb"
)

// BenchmarkLoadSnapshot loads a snapshot of 100,000 pairs of 4 KiB into a
// new store, from a file in the page cache.
func BenchmarkLoadSnapshot(b *testing.B) {
	dir := b.TempDir()
	val := make([]byte, 4096)
	name, size, err := snap.Write(vfs.OS, dir, snap.Meta{Index: 2, Term: 1, Conf: raftpb.ConfState{Voters: []uint64{1}}}, func(yield func(string, []byte) bool) {
		for i := range 100_000 {
			if !yield(fmt.Sprintf("user%012d", i), val) {
				return
			}
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(size)
	for b.Loop() {
		st := store.New(store.Options{})
		if _, err := snap.Load(vfs.OS, dir+"/"+name, st.Put); err != nil {
			b.Fatal(err)
		}
	}
}
