// Package crashtest holds TestKill9, which kills `flint serve` with SIGKILL
// while many clients write to it, over and over on one data directory, and
// checks after every restart that no acknowledged write was lost.
//
// Each of 16 workers owns 64 keys and a counter and is their only writer,
// one call at a time: a SET, MSET, DEL, INCR or GET alone, or a pipeline of
// them, through Flint's client (even workers) or go-redis (odd ones). Every
// value names the write that stored it (worker, key, sequence number) and is
// checked byte for byte. So a worker knows exactly what its keys hold and
// what every reply must be, except for its last call when the kill came,
// whose reply never arrived. After the restart each worker's keys must hold
// the acknowledged state followed by some prefix of that call's commands,
// and no other key may exist. The state found becomes the next cycle's
// baseline.
//
// The check reads every key twice: at once, and again after a write, which
// commits only after everything the log held at the restart; both reads must
// agree, so a read that misses acknowledged writes fails too. Every fourth
// kill comes once the workers have stopped and every call has been answered,
// when the newest entries in the log are all acknowledged ones; every third
// cycle also kills a server 1 to 40 ms after it starts, while it recovers
// the data directory or has just begun serving. The server
// snapshots every 100 log entries, and one value in 8 is 16 to 64 KiB, so
// kills also hit snapshots being written and log segments being rotated and
// deleted. No server may log an error.
//
// FLINT_CRASH_CYCLES sets the number of cycles (default 20) and
// FLINT_CRASH_SEED the seed, which the test logs. FLINT_CRASH_TAGS builds
// the server with build tags, such as flintbugs for injected bugs (see
// package bugs). See docs/CRASH_TESTING.md.
package crashtest
