// Package client is Flint's Go client. It speaks RESP2 or RESP3 to a Flint
// (or Redis) server, or to the members of a replicated Flint, pipelines
// automatically, and rides through failovers.
//
// # Pipelining
//
// A Client keeps a small pool of connections (WithPoolSize, default 2) to
// the member it sends to and spreads calls over them round-robin. Each connection has two goroutines:
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
// A Batch sends its commands together, in one request on one connection,
// and gets their replies together; nothing else is written between them.
//
// Calls from one goroutine take effect in the order made, since each waits
// for its reply. Concurrent calls have no order among themselves.
//
// # Failover
//
// A Client knows the members of a cluster: the address given to New, the
// seeds given with WithSeeds, and those that servers name. It sends every
// call to one of them, its target, which it learns from the servers:
//
//   - New connects to the first seed that answers and asks it for CLUSTER
//     SLOTS. A reply names the leader, which becomes the target, and the
//     other members. A server that answers with an error, as a plain Flint
//     or Redis server does, becomes the target itself.
//   - A follower refuses a command with "MOVED <slot> <host:port>": the
//     call is sent at once to that address, which becomes the target for
//     later calls. (The Client keeps a table from slot ranges to members;
//     until commands are routed by their keys' slots, every call goes to
//     the member serving slot 0, which, while a cluster has one group,
//     serves them all.)
//   - TRYAGAIN and CLUSTERDOWN (no leader), READONLY (not the leader, and
//     not knowing who is) and LOADING, and a failure to connect, make the
//     call wait and try the next member, round the list. A member that runs
//     the call after the target failed it becomes the target.
//
// The waits double from 10 ms up to a second, each jittered. A call retries
// until it succeeds or its context ends, and then returns the last error
// together with the context's. A call whose context has no deadline, to a
// cluster that stays down, waits until it comes back.
//
// A command refused with MOVED, TRYAGAIN, CLUSTERDOWN, READONLY or LOADING
// did not run, and a request not sent did not either: resending it is
// safe. But a command whose connection broke after it was written may have
// taken effect. The rule is:
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
//
// In a Batch, the commands a member refuses are sent again, in order, and
// each reply still takes its command's place; a batch that holds a write
// is not resent after its connection broke, unless the Client has a
// session.
//
// # Sessions
//
// With WithSessions the Client opens a client session (FLINT.SESSION) on
// its first write and sends every write command (SET, SETNX, GETSET, SWAP,
// CAS, MSET, MSETNX, DEL, INCR, DECR, INCRBY, DECRBY, APPEND, FLUSHDB,
// FLUSHALL, in calls and in a Batch alike) as
//
//	FLINT.SEQ <client id> <seq> <lowest unacknowledged> <command> [arg ...]
//
// Each write gets the next sequence number, 1 first. The lowest
// unacknowledged number is the least of the numbers whose calls have not
// returned, concurrent calls included, so the server drops a kept reply
// only once no call can send its write again. A call that ends, by its
// context or otherwise, gives its number up. Reads and other commands go
// as they are.
//
// If the server answers a write with SESSIONEXPIRED (the session went
// unused for longer than the store's session TTL, ten minutes by default),
// the write was not applied by that send. If no earlier send of it may
// have applied it, a call of one command sends it once more in a new
// session, and a pipeline fails with an error wrapping the *ReplyError.
// If an earlier send may have applied it (its connection broke, or it was
// answered UNKNOWN), the call fails with ErrUnknownOutcome wrapping the
// *ReplyError: the reply that would say so went with the session, and the
// write is not sent again. Either way the next write opens a new session.
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
//     Refusals (MOVED, TRYAGAIN, ...) are retried, and returned only as the
//     last error of a call whose context ended.
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
