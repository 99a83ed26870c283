package client

import (
	"errors"
	"strings"
)

// The package's sentinel errors, classified with errors.Is. See the package
// documentation for when each is returned.
var (
	// ErrNil is returned when the server replies with nil, such as GET of a
	// missing key.
	ErrNil = errors.New("client: nil reply")
	// ErrConnect means the request was not sent because no connection
	// could carry it. Retrying is safe.
	ErrConnect = errors.New("client: no connection to the server")
	// ErrUnknownOutcome means the request was written, or may have been,
	// and its reply will never be seen.
	ErrUnknownOutcome = errors.New("client: outcome unknown")
	// ErrClosed is returned by calls on a closed Client.
	ErrClosed = errors.New("client: closed")
	// ErrProtocol means the server's reply was not what the command
	// returns, or was not RESP at all.
	ErrProtocol = errors.New("client: protocol error")
)

// ReplyError is an error reply from the server, such as
// "ERR wrong number of arguments for 'get' command".
type ReplyError struct {
	Msg string // the whole message, code first
}

// Error returns the server's message unchanged.
func (e *ReplyError) Error() string { return e.Msg }

// Code returns the first word of the message, by Redis convention the
// error's kind: "ERR", "WRONGPASS", "NOAUTH", "WRONGTYPE", ...
func (e *ReplyError) Code() string {
	code, _, _ := strings.Cut(e.Msg, " ")
	return code
}
