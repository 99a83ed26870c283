package cli

import (
	"strconv"
	"strings"

	"github.com/flintkv/flint/internal/protocol"
)

// appendTTY appends v the way redis-cli 7's cliFormatReplyTTY does. prefix
// is the indentation of every line of an aggregate but its first, which
// follows the parent's index number. Every reply ends with a newline.
func appendTTY(b []byte, v protocol.Value, prefix string) []byte {
	switch v.Kind {
	case protocol.KindError:
		b = append(b, "(error) "...)
		b = append(b, v.Str...)
	case protocol.KindSimple, protocol.KindVerbat:
		b = append(b, v.Str...)
	case protocol.KindInt:
		b = strconv.AppendInt(append(b, "(integer) "...), v.Int, 10)
	case protocol.KindDouble:
		b = append(append(b, "(double) "...), v.Str...)
	case protocol.KindBigNum:
		// redis-cli 7.0 aborts with "Unknown reply type: 13" here.
		b = append(append(b, "(big number) "...), v.Str...)
	case protocol.KindBulk:
		b = appendRepr(b, v.Str)
	case protocol.KindNull:
		b = append(b, "(nil)"...)
	case protocol.KindBool:
		b = append(b, boolText(v.Int)...)
	case protocol.KindArray, protocol.KindSet, protocol.KindPush, protocol.KindMap:
		return appendAggregateTTY(b, v, prefix)
	default:
		b = append(b, "(unknown reply type "+strconv.QuoteRune(rune(v.Kind))+")"...)
	}
	return append(b, '\n')
}

// emptyText is what redis-cli prints for an aggregate with no elements.
var emptyText = map[protocol.Kind]string{
	protocol.KindArray: "(empty array)",
	protocol.KindSet:   "(empty set)",
	protocol.KindPush:  "(empty push)",
	protocol.KindMap:   "(empty hash)",
}

// appendAggregateTTY numbers the elements of v, "1) " for arrays and
// pushes, "1~ " for sets, and "1# key => value" for maps, with the numbers
// right-aligned to the width of the largest. Nested aggregates continue on
// the line of their index and indent their later lines past it.
func appendAggregateTTY(b []byte, v protocol.Value, prefix string) []byte {
	if len(v.Elems) == 0 {
		return append(b, emptyText[v.Kind]+"\n"...)
	}
	n, sep := len(v.Elems), byte(')')
	switch v.Kind {
	case protocol.KindSet:
		sep = '~'
	case protocol.KindMap:
		n, sep = n/2, '#'
	}
	width := len(strconv.Itoa(n))
	inner := prefix + strings.Repeat(" ", width+2)
	for i := 0; i < len(v.Elems); i++ {
		if i > 0 {
			b = append(b, prefix...)
		}
		idx := i + 1
		if v.Kind == protocol.KindMap {
			idx = i/2 + 1
		}
		b = appendPadded(b, idx, width)
		b = append(b, sep, ' ')
		b = appendTTY(b, v.Elems[i], inner)
		if v.Kind == protocol.KindMap && i+1 < len(v.Elems) {
			i++
			b = append(b[:len(b)-1], " => "...) // the key's newline goes
			if multiline(v.Elems[i]) {
				b = append(append(b, '\n'), inner...)
			}
			b = appendTTY(b, v.Elems[i], inner)
		}
	}
	return b
}

// multiline reports whether appendTTY prints v on more than one line; a map
// value that is starts on a line of its own (redis-cli's
// cliIsMultilineValueTTY).
func multiline(v protocol.Value) bool {
	switch v.Kind {
	case protocol.KindArray, protocol.KindSet, protocol.KindPush:
		return len(v.Elems) > 1 || len(v.Elems) == 1 && multiline(v.Elems[0])
	case protocol.KindMap:
		return len(v.Elems) > 2 || len(v.Elems) == 2 && multiline(v.Elems[1])
	}
	return false
}

func appendPadded(b []byte, n, width int) []byte {
	s := strconv.Itoa(n)
	for range width - len(s) {
		b = append(b, ' ')
	}
	return append(b, s...)
}

func boolText(n int64) string {
	if n != 0 {
		return "(true)"
	}
	return "(false)"
}

// appendRepr appends s double-quoted with the escapes of Redis's
// sdscatrepr: \" \\ \n \r \t \a \b, and \xHH for other bytes outside
// printable ASCII. The output reads back through SplitArgs as s.
func appendRepr(b, s []byte) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for _, c := range s {
		switch c {
		case '\\', '"':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, `\n`...)
		case '\r':
			b = append(b, `\r`...)
		case '\t':
			b = append(b, `\t`...)
		case '\a':
			b = append(b, `\a`...)
		case '\b':
			b = append(b, `\b`...)
		default:
			if c >= 0x20 && c < 0x7f {
				b = append(b, c)
			} else {
				b = append(b, '\\', 'x', hex[c>>4], hex[c&0xf])
			}
		}
	}
	return append(b, '"')
}

// appendRaw appends v the way redis-cli 7's cliFormatReplyRaw does: strings
// bare, nil as nothing, errors with a newline of their own, elements of an
// aggregate one per line, a map's key and value on one line separated by a
// space. The caller ends the reply.
func appendRaw(b []byte, v protocol.Value) []byte {
	switch v.Kind {
	case protocol.KindNull:
	case protocol.KindError:
		b = append(append(b, v.Str...), '\n')
	case protocol.KindInt:
		b = strconv.AppendInt(b, v.Int, 10)
	case protocol.KindBool:
		b = append(b, boolText(v.Int)...)
	case protocol.KindArray, protocol.KindSet, protocol.KindPush:
		for i, e := range v.Elems {
			if i > 0 {
				b = append(b, '\n')
			}
			b = appendRaw(b, e)
		}
	case protocol.KindMap:
		for i := 0; i+1 < len(v.Elems); i += 2 {
			if i > 0 {
				b = append(b, '\n')
			}
			b = append(appendRaw(b, v.Elems[i]), ' ')
			b = appendRaw(b, v.Elems[i+1])
		}
	default: // simple, bulk and verbatim strings, doubles, big numbers
		b = append(b, v.Str...)
	}
	return b
}
