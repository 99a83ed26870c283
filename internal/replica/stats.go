package replica

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/flintkv/flint/internal/vfs"
)

// stats count the replica's work since it started.
type stats struct {
	commands atomic.Int64 // commands applied
	dropped  atomic.Int64 // messages from other members dropped for a full queue
	// appendWaits counts the messages the raft loop held back until the
	// append thread had written enough (see handAppend).
	appendWaits atomic.Int64
}

// PersistenceInfo returns the persistence section of INFO as name:value
// lines.
func (r *Replica) PersistenceInfo() []string {
	m := r.wal.Metrics()
	last := r.snaps.newest()
	policy := "always"
	if r.opt.NoSync {
		policy = "never"
	}
	var avgSync time.Duration
	perSync := 0.0
	if m.Syncs > 0 {
		avgSync = m.SyncTime / time.Duration(m.Syncs)
		perSync = float64(r.stats.commands.Load()) / float64(m.Syncs)
	}
	lastErr := "ok"
	if last.err != nil {
		lastErr = "err"
	}
	return []string{
		"fsync_policy:" + policy,
		fmt.Sprintf("log_bytes:%d", m.LogBytes),
		fmt.Sprintf("log_segments:%d", m.Segments),
		fmt.Sprintf("log_segments_preallocated:%d", m.Spares),
		fmt.Sprintf("log_last_index:%d", m.LastIndex),
		fmt.Sprintf("applied_index:%d", r.applied.Load()),
		fmt.Sprintf("entries_since_snapshot:%d", m.LastIndex-last.index),
		fmt.Sprintf("last_snapshot_index:%d", last.index),
		fmt.Sprintf("last_snapshot_bytes:%d", last.size),
		fmt.Sprintf("last_snapshot_time:%d", unix(last.at)),
		fmt.Sprintf("last_snapshot_duration_ms:%d", last.took.Milliseconds()),
		"last_snapshot_status:" + lastErr,
		// Redis's name, which tools that wait for a BGSAVE to end poll.
		fmt.Sprintf("rdb_bgsave_in_progress:%d", b2i(r.snaps.running.Load())),
		fmt.Sprintf("fsyncs:%d", m.Syncs),
		fmt.Sprintf("fsync_avg_us:%d", avgSync.Microseconds()),
		fmt.Sprintf("fsync_max_us:%d", m.MaxSync.Microseconds()),
		fmt.Sprintf("writes_per_fsync:%.2f", perSync),
		fmt.Sprintf("disk_full:%d", b2i(r.noSpace.Load())),
		fmt.Sprintf("mapped_file_bytes:%d", vfs.MappedBytes()),
	}
}

// LastSnapshot returns when the newest snapshot was written, or the zero
// time if none was since the replica started.
func (r *Replica) LastSnapshot() time.Time { return r.snaps.newest().at }

// Applied returns the index of the last entry applied to Store: once
// Apply returns, at least that of its batch's last entry.
func (r *Replica) Applied() uint64 { return r.applied.Load() }

func unix(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// raftLogger sends raft's log to slog: warnings and errors only, since raft
// narrates every election at info level.
type raftLogger struct{ l *slog.Logger }

func (g raftLogger) Debug(v ...any)                 {}
func (g raftLogger) Debugf(format string, v ...any) {}
func (g raftLogger) Info(v ...any)                  {}
func (g raftLogger) Infof(format string, v ...any)  {}
func (g raftLogger) Warning(v ...any)               { g.l.Warn("raft: " + fmt.Sprint(v...)) }
func (g raftLogger) Warningf(format string, v ...any) {
	g.l.Warn("raft: " + fmt.Sprintf(format, v...))
}
func (g raftLogger) Error(v ...any) { g.l.Error("raft: " + fmt.Sprint(v...)) }
func (g raftLogger) Errorf(format string, v ...any) {
	g.l.Error("raft: " + fmt.Sprintf(format, v...))
}
func (g raftLogger) Fatal(v ...any) { g.Panic(v...) }
func (g raftLogger) Fatalf(format string, v ...any) {
	g.Panicf(format, v...)
}
func (g raftLogger) Panic(v ...any) { panic("raft: " + fmt.Sprint(v...)) }
func (g raftLogger) Panicf(format string, v ...any) {
	panic("raft: " + fmt.Sprintf(format, v...))
}
