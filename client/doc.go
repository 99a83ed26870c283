// Package client is Flint's Go client. It speaks RESP2 or RESP3 to a Flint
// (or Redis) server, to the members of a replicated Flint, or to the
// groups of a sharded one (or a Redis Cluster), routes each command to the
// member that serves its key, pipelines automatically, and rides through
// failovers and slot moves.
//
// # Pipelining
//
// A Client keeps a small pool of connections (WithPoolSize, default 2) to
// each member it sends to and spreads calls over them round-robin. Each
// connection has two goroutines:
//
//	callers --submit--> queue --writer--> one Write --> server
//	callers <--done---- inflight (FIFO) <--reader-- replies
//
// A call encodes its command, appends it to its connection's queue and
// waits. The writer takes everything queued, moves it to the inflight list
// and writes it all with one Write; calls that arrive while a Write is under
// way are taken together by the next one. The server answers the commands
// of a connection in the order they came, so the reader hands each reply to
// the call at the head of the inflight list. Many goroutines calling at once
// therefore share few writes, reads and round trips without asking for it.
//
// A Batch sends its commands together and gets their replies together:
// the commands for one member go in one request on one connection, with
// nothing else written between them, and take effect in the order of the
// batch; the requests to different members go at the same time, and the
// replies come back in the batch's order.
//
// Calls from one goroutine take effect in the order made, since each waits
// for its reply. Concurrent calls have no order among themselves.
//
// # Routing
//
// The Client keeps a map of the cluster's 16384 hash slots (slot =
// CRC16(key) mod 16384, hashing only a key's {hash tag} if it has one, as
// Redis Cluster does), learned from CLUSTER SLOTS: slot ranges, each with
// its master and replicas. New asks the member it connects to. A server
// that answers with an error (a plain Redis or Flint server) leaves the map
// empty, and every call goes to that server, its target. CLUSTER SLOTS has
// no epoch, so the Client asks for CLUSTER INFO first, in the same round
// trip, whose cluster_current_epoch a sharded Flint sets to its map's
// epoch: the Client keeps the map of the highest epoch it has learned, and
// passes over a member's older one (a member whose map lags the managers'
// would otherwise take it back to routes it already left). A map of the
// same epoch is taken (its leaders may be newer); one without an epoch
// (a server whose CLUSTER INFO has none) is taken as before.
//
// A map of one range (a replicated Flint: one group serves every slot)
// makes its master the target, and every call goes there. A map of
// several ranges is a sharded cluster, and then:
//
//   - A command with keys goes to the master of its first key's slot. Its
//     key is its first argument, or, for FLINT.SEQ, that of the command it
//     wraps; commands without keys (PING, INFO, DBSIZE, FLUSHDB, CLUSTER,
//     FLINT.SESSION, ...) go to the target, the master of slot 0.
//   - MGET and EXISTS whose keys are in several slots are split into one
//     command per slot, sent to each slot's master, and their replies put
//     back together in the order of the keys: the reply is then not read
//     at one instant, but each key's value is as linearizable as a GET's.
//     The writes of several keys (MSET, MSETNX, DEL) are never split: a
//     member answers them CROSSSLOT if their keys are in several slots, and
//     that error is the caller's, not retried. Keys that share a hash tag
//     share a slot, and go together.
//   - RANGE goes once to each master the map names (each answers with the
//     keys its group holds), routed by the first slot it serves so that it
//     follows that group through a failover, and the replies are merged in
//     key order, its limit applied to the merged pairs. A key two groups hold, as one can while
//     its slot moves, is taken once, from the master the map names for its
//     slot. Each pair is as linearizable as a GET's; the range as a whole
//     is not read at one instant. A group with no leader, or whose master
//     is down, makes RANGE wait and retry, as any call to it does. Once
//     every part has answered, the Client asks each master that answered
//     for CLUSTER SLOTS: if one gives a map other than the one the RANGE
//     was planned in (a slot moved, to a group the map may not name yet),
//     the Client learns it and runs the RANGE again, backing off from 100 ms
//     to 1 s, until the maps match (see docs/SHARDING.md, "RANGE across groups").
//   - A member that does not serve a command's slot answers MOVED <slot>
//     <host:port>: the call is sent there at once. The map learns it: the
//     slot's whole range moves there if the address is one of the range's
//     nodes (its group has a new leader), the slot alone if not (the slot
//     moved to another group). In a map of one range, or a range that no
//     CLUSTER SLOTS named nodes for, the whole range moves. A MOVED, and in a sharded map a failure to
//     reach a member, also make the Client ask for CLUSTER SLOTS again, in
//     the background, at most once per 100 ms, from a member it is
//     connected to if it can; calls do not wait for it.
//   - A member that is moving a slot away and no longer holds the key
//     answers ASK <slot> <host:port>: the command is sent to that member
//     once, right after ASKING, on one connection in one write, and the map
//     does not change, so the next command on the slot goes to its owner
//     again. A transaction goes whole, with one ASKING before its MULTI,
//     which holds for the whole transaction, as in Redis.
//
// # Failover
//
// A Client knows the members of a cluster: the address given to New, the
// seeds given with WithSeeds, and those that servers name. Each call goes
// where the map says (see Routing); what the members answer steers it:
//
//   - MOVED and ASK send the call on at once, as Routing says.
//   - TRYAGAIN and CLUSTERDOWN (no leader), READONLY (not the leader, and
//     not knowing who is) and LOADING, and a failure to connect, make the
//     call wait and try again: at the member the map now names for its
//     slot, if that changed meanwhile (another call, or a refresh of the
//     map, learned of a new leader), or else at the next candidate, round
//     the list. For a command with keys in a sharded map the candidates are
//     the nodes of its slot's range, master and replicas; otherwise they
//     are all the members.
//     A candidate that runs the call after the master failed it becomes the
//     master of the slot's range (of every slot, in a map of one range).
//   - A command sent where a MOVED said and answered with another MOVED,
//     or sent where an ASK said and answered with another ASK (two members
//     naming each other while a leader or a slot changes hands), waits
//     before it goes on.
//
// Each command of a call, or of a Batch, goes its own way: those whose
// member is down wait and retry, and the others are answered. A call
// returns once all of its commands are. A shard that is down holds up only
// the calls with commands for its slots.
//
// The waits double from 10 ms up to a second, each jittered. A call retries
// until it succeeds or its context ends, and then returns the last error
// together with the context's. A call whose context has no deadline, to a
// cluster that stays down, waits until it comes back.
//
// A command refused with MOVED, ASK, TRYAGAIN, CLUSTERDOWN, READONLY or
// LOADING did not run, and a request not sent did not either: resending it
// is safe. But a command whose connection broke after it was written may
// have taken effect. The rule is:
//
//   - A read (GET, MGET, EXISTS, STRLEN, RANGE, DBSIZE, PING, ECHO) whose
//     outcome is unknown is sent again, like a refused one.
//   - With WithSessions, a write whose outcome is unknown is sent again
//     with the same sequence number (see Sessions), which makes the server
//     answer it from the reply it kept if it ran it already: it takes
//     effect once. So is one the server itself answers with an UNKNOWN
//     error (its leader lost leadership before the write committed).
//   - Without sessions, a write (any other command) whose outcome is
//     unknown is never sent again: the call fails with ErrUnknownOutcome,
//     or returns the server's UNKNOWN error reply, and the caller, who
//     knows whether the write may apply twice, decides.
//   - MULTI, EXEC, DISCARD, WATCH and UNWATCH change nothing themselves: a
//     Batch that holds a transaction is sent again when its other commands
//     may be. With sessions a transaction that writes, held whole by one
//     Batch, is one write of its session (see Sessions): it takes effect
//     once, and a resend gets the reply of that one application, its
//     reads' included. A transaction on one connection
//     needs all of its commands to go to one member: in a sharded map, its
//     keys must share a slot, and a Batch sends MULTI and the EXEC or
//     DISCARD that ends it, which have no key, to the member of its first
//     key.
//
// In a Batch, the commands a member refuses are sent again, in order, and
// each reply still takes its command's place; a transaction the Batch holds
// whole goes again whole, MULTI to EXEC, when a member refused any of its
// commands (a follower answers MULTI, turns the queued commands away with
// MOVED, and discards the transaction), since a queued command sent on
// alone would apply outside the transaction and its session; a batch's request to a
// member that holds a write is not resent after its connection broke,
// unless the Client has a session, and the batch then fails with
// ErrUnknownOutcome, whatever became of its requests to other members.
//
// # Sessions
//
// With WithSessions the Client opens a client session (FLINT.SESSION) on
// its first write and sends every write command (SET, SETNX, GETSET, SWAP,
// CAS, MSET, MSETNX, DEL, UNLINK, INCR, DECR, INCRBY, DECRBY, APPEND, FLUSHDB,
// FLUSHALL, GETDEL, INCRBYFLOAT, SETRANGE, SETBIT, BITOP, BITFIELD, RENAME,
// RENAMENX, COPY, in calls and in a Batch alike) as
//
//	FLINT.SEQ <client id> <seq> <lowest unacknowledged> <command> [arg ...]
//
// Each write gets the next sequence number of its session, 1 first. The
// lowest unacknowledged number is the least of the session's numbers whose
// calls have not returned, concurrent calls included, so the server drops
// a kept reply only once no call can send its write again. A call that
// ends, by its context or otherwise, gives its numbers up. Reads and other
// commands go as they are.
//
// A transaction that a Batch holds whole, from MULTI to the EXEC that ends
// it, and that holds a write, is one write: its commands go as they are,
// and its EXEC as FLINT.SEQ <client id> <seq> <lowest unacknowledged> EXEC,
// in the session of its first key's range. The server keeps EXEC's reply,
// so a resend is answered with the reply of the transaction's one
// application, and not with reads run again after its writes.
//
// Each group of a cluster keeps its own sessions, so in a sharded map the
// Client has one session per slot range: it opens it by sending
// FLINT.SESSION to the range's master on the range's first write, and
// sends each write in the session of its slot's range. Ranges open their
// sessions independently: a group with no leader holds up the writes to
// its own slots only. A range whose bounds change (a slot moved out of it,
// learned from a MOVED or a refresh of the map) gets a new session. A
// write resent after its slot moved to another group keeps its session and
// number; the new group answers SESSIONEXPIRED if it does not know them.
//
// If the server answers a write with SESSIONEXPIRED (the session went
// unused for longer than the store's session TTL, ten minutes by default,
// or the write's slot moved to a group that does not know the session),
// the write was not applied by that send. If no earlier send of it may
// have applied it, a call of one command sends it once more in a new
// session, and a pipeline fails with an error wrapping the *ReplyError.
// If an earlier send may have applied it (its connection broke, or it was
// answered UNKNOWN), the call fails with ErrUnknownOutcome wrapping the
// *ReplyError: the reply that would say so went with the session, and the
// write is not sent again. Either way the next write of the range opens a
// new session; but for a refusal by the member an ASK named, the target
// of a slot move, which does not know the sessions the source opened
// after the move copied its sessions (docs/SHARDING.md, "Moving slots"):
// the range's session stays open for the slots its group serves, and the
// call of one command sends the write once more in a session opened at
// that member (kept for the next such refusal), since any new session of
// the range's group would be refused there too. A call of one command
// whose new session is refused in turn by a member other than the one
// that opened it (the slot moved on, or the map learned was older) sends
// it again likewise, until three sessions refused it.
//
// A server that does not know FLINT.SESSION (Redis, an older Flint) or
// has no replicated log to keep sessions in (a Flint store used without
// raft) answers it with an error; the Client then sends writes as they
// are, and the rules without sessions hold.
//
// Sessions are an option rather than the default: opening one is a write
// that goes through the leader's log, each session holds replies in the
// replicated state of every member until they are acknowledged or the
// session expires, and each write carries about forty bytes more. A
// Client that only reads, or whose writes are safe to apply twice, or
// that wants to decide itself about a write of unknown outcome, need not
// pay for that.
//
// # Errors
//
// Every method takes a context. The errors it can return are:
//
//   - ErrNil: the server replied with nil (a missing key).
//   - *ReplyError: the server replied with an error; Code gives its first
//     word (ERR, WRONGPASS, NOAUTH, ...). The connection stays usable.
//     Refusals (MOVED, ASK, TRYAGAIN, ...) are retried, and returned only
//     as the last error of a call whose context ended. CROSSSLOT (a write
//     of keys in several slots, in a sharded cluster) is returned at once.
//   - ErrConnect: the client could not connect (dial, AUTH or HELLO failed),
//     or its connection broke before the request was written. A write that
//     fails with ErrConnect did not take effect: it was never sent, or was
//     refused each time it was.
//   - ErrUnknownOutcome: the request was written, or may have been, and then
//     the connection broke, the Client was closed or the context ended. The
//     command may or may not have taken effect; a retry of a non-idempotent
//     command may apply it twice. With sessions, a write fails so only when
//     its context ended, the Client was closed, or its session expired.
//   - The context's error, wrapped (errors.Is(err, context.DeadlineExceeded)
//     works), together with ErrUnknownOutcome if the request had been taken
//     for writing, or else with the last error before the context ended. A
//     context that ends while a call waits for a reply does not close the
//     connection: the late reply is read and dropped.
//   - ErrClosed: the Client was closed.
//   - ErrProtocol: the reply did not fit the command (the connection stays
//     usable), or the server sent bytes that are not RESP (the connection is
//     dropped and the calls on it fail with ErrUnknownOutcome).
//
// Byte slices passed in may be reused once the call returns; byte slices
// returned belong to the caller.
//
// The client has no timeouts of its own: give calls a context deadline. A
// server that stops answering without closing the connection (a paused
// process, a half-dead proxy) makes calls fail at their deadlines with
// ErrUnknownOutcome, and calls without a deadline wait for ever; the
// connection is kept until it breaks, since a late reply may still come.
//
// A broken connection is replaced by dialing again on a later call. A call
// whose connection broke before its request was written is sent again at
// once on a new connection, before any wait.
package client
