package vfs

// PaceBytes is how much a Paced file lets be written between fsyncs.
const PaceBytes = 1 << 20

// Paced is a File that a background task fills in bulk (a snapshot, a
// preallocated log segment): its WriteAt fsyncs the file after every
// PaceBytes written, so the kernel never holds more than that of its data
// unsynced. One fsync of a large file queues all its dirty pages at the
// disk at once, and a foreground fsync, the log's that acknowledges
// writes, waits behind them. Measured here (2026-11-22, a throwaway
// program: 16 KiB appends and fdatasync in a loop, as the log does, while
// another file is written with 64 MiB of zeros): the slowest append's
// fdatasync took 36-45 ms with one fsync of the 64 MiB at the end, and
// 3.5-5 ms with one per MiB (11-14 ms per 4 MiB), which also finished the
// 64 MiB sooner. Close and Sync are the File's own.
type Paced struct {
	File
	unsynced int
}

// WriteAt writes b at off, then fsyncs the file if PaceBytes or more were
// written since its last fsync. An error of either is returned.
func (p *Paced) WriteAt(b []byte, off int64) (int, error) {
	n, err := p.File.WriteAt(b, off)
	p.unsynced += n
	if err == nil && p.unsynced >= PaceBytes {
		p.unsynced = 0
		err = p.File.Sync()
	}
	return n, err
}
