package vfs

import (
	"bytes"
	"errors"
	"syscall"
	"testing"
)

// TestPaced writes 3.5 MiB through a Paced file, in pieces that do not
// divide a MiB, and crashes: what survives is what its three fsyncs made
// durable, a little over 3 MiB.
func TestPaced(t *testing.T) {
	m := NewMem()
	f := mustOpen(t)(m.Create("bulk"))
	must(t, m.SyncDir("."))
	p := &Paced{File: f}
	piece := bytes.Repeat([]byte("0123456789abcdef"), 24<<10/16) // 24 KiB: 1 MiB is not a multiple
	var written int
	for written < 3*PaceBytes+PaceBytes/2 {
		_, err := p.WriteAt(piece, int64(written))
		must(t, err)
		written += len(piece)
	}
	m.Crash()
	got, err := m.ReadFile("bulk")
	must(t, err)
	// An fsync follows the piece that makes a MiB since the one before.
	perSync := (PaceBytes + len(piece) - 1) / len(piece)
	lastSync := 3 * perSync * len(piece)
	if len(got) != lastSync {
		t.Fatalf("%d bytes survived, want %d: what the third fsync made durable", len(got), lastSync)
	}
	for off := 0; off < len(got); off += len(piece) {
		if !bytes.Equal(got[off:off+len(piece)], piece) {
			t.Fatalf("bytes at %d differ from those written", off)
		}
	}
}

// TestPacedSyncFails: a failed fsync is the error of the WriteAt that made it.
func TestPacedSyncFails(t *testing.T) {
	fy := NewFaulty(NewMem())
	p := &Paced{File: mustOpen(t)(fy.Create("bulk"))}
	half := make([]byte, PaceBytes/2)
	_, err := p.WriteAt(half, 0)
	must(t, err)
	fy.FailSync(syscall.EIO)
	if _, err := p.WriteAt(half, int64(len(half))); !errors.Is(err, syscall.EIO) {
		t.Fatalf("WriteAt reaching a MiB with fsync failing: %v, want EIO", err)
	}
}
