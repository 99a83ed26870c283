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
//
// # Leniency
//
// Parser accepts what redis-server 7.0 accepts, and refuses what it
// refuses with the same "Protocol error: ..." text (checked against
// redis-server 7.0.15; parserCases in parser_test.go hold each case):
//
//   - A multi-bulk count of 0 or less ("*0", "*-1", "*-10") is an empty
//     command, skipped.
//   - The byte after a length's CR, and the two bytes after a bulk string,
//     are skipped unread: "$4\r\nPINGxx" is PING.
//   - Inline commands split as sdssplitargs does: a quote inside a word
//     starts a quoted part that ends it (SET k a"b" sets ab; "a"b is
//     "unbalanced quotes in request"); only space, tab, CR and LF end an
//     unquoted word; a NUL byte before the LF hides it, so the line waits
//     until it is "too big inline request".
//
// Two differences remain, both in the timing of an error on input that
// can only fail: a length line longer than 32 bytes is refused at once
// (Redis waits for its CR, or 64 KiB), and a byte other than the prefix
// where a length belongs is refused before its CR arrives.
package protocol
