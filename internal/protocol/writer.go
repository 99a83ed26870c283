package protocol

import "strconv"

// Version is the protocol a connection speaks: 2 until HELLO 3 switches it.
type Version int

// The protocol versions.
const (
	RESP2 Version = 2
	RESP3 Version = 3
)

// The Append* functions encode one reply element at the end of b and return
// the extended buffer. They never allocate unless b must grow.

// AppendSimple appends a simple string such as "+OK". s must not contain CR or LF.
func AppendSimple(b []byte, s string) []byte {
	b = append(b, '+')
	b = append(b, s...)
	return append(b, '\r', '\n')
}

// AppendOK appends "+OK".
func AppendOK(b []byte) []byte { return append(b, "+OK\r\n"...) }

// AppendError appends an error reply. msg starts with its code ("ERR ...",
// "WRONGPASS ..."); CR and LF in it are replaced by spaces so that a reply
// can never break the framing.
func AppendError(b []byte, msg string) []byte {
	b = append(b, '-')
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		b = append(b, c)
	}
	return append(b, '\r', '\n')
}

// AppendInt appends an integer.
func AppendInt(b []byte, n int64) []byte {
	b = append(b, ':')
	b = strconv.AppendInt(b, n, 10)
	return append(b, '\r', '\n')
}

// AppendBulk appends a bulk string.
func AppendBulk(b, s []byte) []byte {
	b = appendLen(b, '$', len(s))
	b = append(b, s...)
	return append(b, '\r', '\n')
}

// AppendBulkString appends a bulk string.
func AppendBulkString(b []byte, s string) []byte {
	b = appendLen(b, '$', len(s))
	b = append(b, s...)
	return append(b, '\r', '\n')
}

// AppendBulkHeader appends only the header of a bulk string of n bytes; the
// caller then writes the n bytes and CRLF itself (used to stream large values).
func AppendBulkHeader(b []byte, n int) []byte { return appendLen(b, '$', n) }

// AppendNull appends a null: "$-1" in RESP2, "_" in RESP3.
func AppendNull(b []byte, v Version) []byte {
	if v == RESP3 {
		return append(b, "_\r\n"...)
	}
	return append(b, "$-1\r\n"...)
}

// AppendNullArray appends a null array: "*-1" in RESP2, "_" in RESP3.
func AppendNullArray(b []byte, v Version) []byte {
	if v == RESP3 {
		return append(b, "_\r\n"...)
	}
	return append(b, "*-1\r\n"...)
}

// AppendArray appends the header of an array of n elements.
func AppendArray(b []byte, n int) []byte { return appendLen(b, '*', n) }

// AppendMap appends the header of a map of n pairs: "%n" in RESP3, an array
// of 2n elements in RESP2. The caller appends key, value, key, value, ...
func AppendMap(b []byte, n int, v Version) []byte {
	if v == RESP3 {
		return appendLen(b, '%', n)
	}
	return appendLen(b, '*', 2*n)
}

// AppendPush appends the header of a push of n elements, which the server
// sends unasked (pub/sub messages): ">n" in RESP3, an array in RESP2.
func AppendPush(b []byte, n int, v Version) []byte {
	if v == RESP3 {
		return appendLen(b, '>', n)
	}
	return appendLen(b, '*', n)
}

// AppendSet appends the header of a set of n elements ("~n" in RESP3, an
// array in RESP2).
func AppendSet(b []byte, n int, v Version) []byte {
	if v == RESP3 {
		return appendLen(b, '~', n)
	}
	return appendLen(b, '*', n)
}

// AppendVerbatim appends text as a RESP3 verbatim string of format "txt", or
// as a bulk string in RESP2.
func AppendVerbatim(b []byte, text string, v Version) []byte {
	if v != RESP3 {
		return AppendBulkString(b, text)
	}
	b = appendLen(b, '=', len(text)+4)
	b = append(b, "txt:"...)
	b = append(b, text...)
	return append(b, '\r', '\n')
}

// AppendCommand appends a command as an array of bulk strings, as a client sends it.
func AppendCommand(b []byte, args ...[]byte) []byte {
	b = AppendArray(b, len(args))
	for _, a := range args {
		b = AppendBulk(b, a)
	}
	return b
}

func appendLen(b []byte, prefix byte, n int) []byte {
	b = append(b, prefix)
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, '\r', '\n')
}
