// Package client is Flint's Go client. It speaks RESP2 or RESP3 to one
// Flint (or Redis) server and pipelines automatically.
//
// # Pipelining
//
// A Client keeps a small pool of connections (WithPoolSize, default 2) and
// spreads calls over them round-robin. Each connection has two goroutines:
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
// # Errors
//
// Every method takes a context. The errors it can return are:
//
//   - ErrNil: the server replied with nil (a missing key).
//   - *ReplyError: the server replied with an error; Code gives its first
//     word (ERR, WRONGPASS, NOAUTH, ...). The connection stays usable.
//   - ErrConnect: the client could not connect (dial, AUTH or HELLO failed),
//     or its connection broke before the request was written. Nothing was
//     sent, so retrying is safe.
//   - ErrUnknownOutcome: the request was written, or may have been, and then
//     the connection broke, the Client was closed or the context ended. The
//     command may or may not have taken effect; a retry of a non-idempotent
//     command may apply it twice.
//   - The context's error, wrapped (errors.Is(err, context.DeadlineExceeded)
//     works), together with ErrUnknownOutcome if the request had been taken
//     for writing. A context that ends while a call waits for a reply does not
//     close the connection: the late reply is read and dropped.
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
// whose connection broke before its request was written is retried once on
// a new connection.
package client
