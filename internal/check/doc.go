// Package check finds linearizability violations and lost writes in Flint
// from recorded histories. It owns `flint check`: a workload of concurrent
// clients, faults injected into a server it started itself (kill -9 and
// restart, SIGSTOP/SIGCONT) or into the members of a replicated group it
// started (also kills of the leader, partitions, membership changes and
// wiped disks), the recording of every operation, and the verdict, which
// porcupine reaches from the history alone.
//
// # A replicated group
//
// With Config.Nodes the checker starts a group of that many `flint serve`
// processes on loopback. Each member's peers reach it through a relay in
// the checker (relay.go): the group knows the member's peer address as
// the relay's, and the member listens behind it (serve --peer-listen). The
// relay reads each connection's first frame, the transport's hello, to
// learn who calls, and drops the connections of callers the nemesis cut
// off, so partitions (both ways or one way) need no privileges and never
// touch the host's network. The clients know every member and follow the
// group's MOVED replies to its leader; with Config.Sessions they write in
// client sessions, so that a write they resend must take effect once.
//
// # A sharded cluster
//
// With Config.Groups the checker starts a sharded cluster: that many data
// groups, each a group as above (Config.Nodes members) or one data node
// that is not replicated, and Config.Managers managers, a meta group that
// logs the map, whose first map splits the slots evenly among them
// (fleet.go, managers.go). The clients know every manager, learn the map
// from them and route each key to its group. The workload's
// groups of keys each have a hash tag, so that a multi-key command, and
// the keys a RANGE finds, are in one slot, so one data group, and so
// atomic as the model takes them (keys.go); the tags spread the groups of
// keys over the data groups. Each fault strikes one data group, drawn at
// random; the final kill strikes them all; the managers are struck only
// by kill-manager, which kills their leader, also in the middle of a slot
// move. Before the final reads, the map must list no move.
//
// With Config.Hosted, the data groups are hosted by Config.Nodes nodes
// instead, as `flint cluster up --hosted` runs them, one relay in front of
// each node; faults strike nodes, so members of several groups at once
// (hosted.go), or start nodes and groups on them (hostchange.go).
//
// # What is checked
//
// Every command must take effect at one instant between its call and its
// reply, in an order that a sequential key-value store (the model in
// model.go) would answer the same way. Operations whose reply never came
// (timeout, broken connection) may or may not have taken effect: writes
// among them get an infinitely late return and no output, so the model may
// linearize them anywhere after their call or not at all (as etcd's
// robustness tests do), unless a reply shows a value that only that write
// wrote, before which it must have taken effect; reads among them are
// dropped. The search goes in steps that decide most parts cheaply
// (checker.go). After the run (and
// after a final kill -9 and restart when the nemesis kills), every key is
// read once more; those reads join the history, so an acknowledged write
// missing after a crash is a violation like any other, and is also reported
// as a lost write on its own.
//
// The history is split into independent parts: every key on its own,
// except that keys which one command touches together (MSET, MGET, DEL of
// several keys, RANGE, a transaction) are checked as one group with the
// whole group as the model's state. A transaction is one operation: its
// queued commands take effect one after the other at one instant. A failing part is shrunk to a small window of operations
// that is still not linearizable (shrink.go) before it is printed.
//
// # History file
//
// history.json is one JSON object; `flint check --recheck FILE` checks it
// again. Version 1:
//
//	{
//	  "version": 1,
//	  "command": "flint check --spawn --conflict",  // what recorded it
//	  "seed": 42,
//	  "clients": 5,             // workload clients are 0..clients-1; client
//	                            // `clients` made the final reads
//	  "keys": ["t9f0c/g0/k0", ...],  // every key the workload may touch,
//	                            // sorted; the store starts with none of them
//	  "faults": [{"kind": "kill", "start": 812000000, "end": 871000000}, ...],
//	  "ops": [
//	    {"client": 3, "call": 1000, "return": 250000,
//	     "cmd": ["SET", "t9f0c/g0/k1", "c3-7"], "reply": "OK"},
//	    {"client": 1, "call": 812100000, "return": 812400000,
//	     "cmd": ["INCR", "t9f0c/g0/n"], "unknown": "client: outcome unknown: EOF"},
//	    {"client": 5, "call": 901000000, "return": 901300000,
//	     "cmd": ["GET", "t9f0c/g0/k1"], "reply": null, "final": true},
//	    ...
//	  ]
//	}
//
// Times are nanoseconds on a monotonic clock from the start of the run. An
// op has either a "reply" or an "unknown" reason, never both. Replies are
// JSON: null for a nil reply, a string for simple and bulk strings, a number
// for integers, an array for arrays, and {"err": "message"} for an error
// reply. A fault's kind is its name, followed, for a group, by what it
// struck: "kill" (SIGKILL; end is when the restarted server accepted
// connections again; a killed member of a group stays down after the end,
// and "restart" is when the ones still down came back at the end of the
// workload), "kill-leader 2, 1 down", "pause" (SIGSTOP; end is SIGCONT),
// "partition halves [2] | [3 1]" (end is when it healed), "membership:
// removed 2, added 4", "wipe 1, rejoined as 6", and "final-kill" (the kill
// -9 and restart of every server between the workload and the final
// reads). In a sharded cluster a fault of one group ends with it: "kill 2,
// 1 down (group 3)". Keys of a sharded run have hash tags:
// "t9f0c/c0/g1{5}/k0".
//
// A cmd is one the model knows, as Redis spells it: GET, SET (with NX, XX,
// GET), SWAP, CAS, DEL, INCR, MSET, MGET and RANGE (with LIMIT); and a
// transaction, written as "MULTI", its queued commands one after the other
// (each GET k, SET k v, DEL k or INCR k), "EXEC", whose reply is EXEC's:
//
//	{"client": 1, "call": 5100, "return": 7300,
//	 "cmd": ["MULTI", "SET", "t9f0c/g0/k1", "c1-4", "GET", "t9f0c/g0/k0", "EXEC"],
//	 "reply": ["OK", null]}
//
// and EXPIRE k s (s from 86400 to 1000000, seconds: no deadline passes
// during a run), PERSIST k and TTL k, whose replies are integers; the model
// checks TTL's by class only: -2 (no key), -1 (no deadline) or from 1 to
// 1000000 (a deadline):
//
//	{"client": 0, "call": 9100, "return": 9400,
//	 "cmd": ["EXPIRE", "t9f0c/g0/k1", "1000000"], "reply": 1}
//
// Version 1 histories without transactions or expiry commands read as
// before; expiry commands came with no change of version, as the
// transactions did (an older checker refuses them as commands it does not
// know). A history
// recorded from the line client's output (package lineclient; the harness
// tests of cmd/flint write one) holds its commands the same way: SWAP k v
// and GET k, whose replies are the old value or null; and its own PUT k v
// and DELETE k, whose replies are "found" or "not_found", whether the key
// had a value (PUT then sets it, DELETE deletes it):
//
//	{"client": 2, "call": 5100, "return": 7300,
//	 "cmd": ["PUT", "key00003", "c2-17"], "reply": "not_found"}
package check
