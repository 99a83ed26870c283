package vfs

import (
	"bytes"
	"errors"
	"syscall"
	"testing"
)

// TestPaced writes 3.5 MiB through a Paced file, in pieces that do not
// divide a MiB, or in one write, and crashes: what survives is what its
// fsyncs made durable, exactly the first 3 MiB.
func TestPaced(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), (3*PaceBytes+PaceBytes/2)/16)
	for _, piece := range []int{24 << 10, len(data)} {
		m := NewMem()
		f := mustOpen(t)(m.Create("bulk"))
		must(t, m.SyncDir("."))
		p := &Paced{File: f}
		for off := 0; off < len(data); off += piece {
			n, err := p.WriteAt(data[off:min(off+piece, len(data))], int64(off))
			must(t, err)
			if n != min(piece, len(data)-off) {
				t.Fatalf("pieces of %d: WriteAt at %d wrote %d bytes", piece, off, n)
			}
		}
		m.Crash()
		got, err := m.ReadFile("bulk")
		must(t, err)
		if !bytes.Equal(got, data[:3*PaceBytes]) {
			t.Errorf("pieces of %d: %d bytes survived, want the first %d written", piece, len(got), 3*PaceBytes)
		}
	}
}

// TestPacedSyncFails: a failed fsync is the error of the WriteAt that made
// it, and of every later one, which writes nothing.
func TestPacedSyncFails(t *testing.T) {
	fy := NewFaulty(NewMem())
	p := &Paced{File: mustOpen(t)(fy.Create("bulk"))}
	half := make([]byte, PaceBytes/2)
	_, err := p.WriteAt(half, 0)
	must(t, err)
	fy.FailSync(syscall.EIO)
	if n, err := p.WriteAt(half, int64(len(half))); !errors.Is(err, syscall.EIO) || n != len(half) {
		t.Fatalf("WriteAt reaching a MiB with fsync failing: %d bytes, %v; want all, and EIO", n, err)
	}
	fy.Heal()
	if n, err := p.WriteAt(half, PaceBytes); !errors.Is(err, syscall.EIO) || n != 0 {
		t.Fatalf("WriteAt after a failed fsync: %d bytes, %v; want none, and EIO", n, err)
	}
}
