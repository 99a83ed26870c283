// Package protocol reads and writes RESP, the Redis serialization protocol,
// in its versions 2 and 3.
//
// It owns three things and nothing else:
//
//   - Parser, the server side: it turns the bytes a client sent into commands
//     (arrays of bulk strings, or inline commands), resuming where it stopped
//     when a command arrives in pieces, and enforcing Limits before anything
//     is allocated for a length field.
//   - The Append* encoders: allocation-free writers of replies into a caller's
//     buffer, in RESP2 or RESP3 as the connection negotiated with HELLO.
//   - Reader, the client side: it decodes any RESP2 or RESP3 reply.
//
// # Wire format
//
// Every element starts with one type byte and ends with CRLF:
//
//	+OK\r\n                    simple string
//	-ERR message\r\n           error
//	:42\r\n                    integer
//	$5\r\nhello\r\n            bulk string (length, then exactly that many bytes)
//	$-1\r\n                    RESP2 null bulk string
//	*2\r\n$3\r\nGET\r\n$1\r\nk\r\n  array of 2 elements
//	*-1\r\n                    RESP2 null array
//	_\r\n                      RESP3 null
//	,3.14\r\n  #t\r\n  (123\r\n   RESP3 double, boolean, big number
//	%1\r\n...  ~2\r\n...  >2\r\n...   RESP3 map (2n elements), set, push
//	=15\r\ntxt:hello world\r\n  RESP3 verbatim string
//	!21\r\nSYNTAX invalid syntax\r\n  RESP3 bulk error
//
// A client sends each command as an array of bulk strings, or as an inline
// command: one line of space-separated words ended by LF or CRLF.
package protocol
