// Package glob matches strings against Redis's glob-style patterns, as
// Redis's stringmatchlen does (util.c): the patterns of PSUBSCRIBE,
// PUBSUB CHANNELS, KEYS and SCAN MATCH.
//
//	?       any one byte
//	*       any run of bytes, empty included (yet only the empty pattern
//	        matches the empty string)
//	[abc]   one of the bytes listed; [^abc] one byte not listed; [a-z] a
//	        range, either way round; \ quotes the next byte inside [ ]
//	\x      the byte x itself
//
// Redis's quirks are kept, since clients see them: an unclosed [ matches
// the bytes listed up to the end of the pattern; a range's ends compare
// as signed bytes; and matching gives up (no match) past 1,000 levels of
// nested *, which bounds the work a hostile pattern can cause.
package glob

// Match reports whether s matches pattern. With nocase, ASCII letters
// match either case.
func Match(pattern, s []byte, nocase bool) bool {
	skip := false
	return match(pattern, s, nocase, &skip, 0)
}

// maxNesting is where Redis stops recursing on * and reports no match.
const maxNesting = 1000

// at returns b[i], or 0 past its end: Redis's strings end with a NUL, which
// its matcher reads in places.
func at(b []byte, i int) byte {
	if i < len(b) {
		return b[i]
	}
	return 0
}

// match is stringmatchlen_impl. skip is set once the rest of a pattern
// after a * matched nowhere in the rest of the string: then no longer match
// of an earlier * can succeed either.
func match(p, s []byte, nocase bool, skip *bool, nesting int) bool {
	if nesting > maxNesting {
		return false
	}
	for len(p) > 0 && len(s) > 0 {
		switch p[0] {
		case '*':
			for len(p) > 1 && p[1] == '*' {
				p = p[1:]
			}
			if len(p) == 1 {
				return true
			}
			for ; len(s) > 0; s = s[1:] {
				if match(p[1:], s, nocase, skip, nesting+1) {
					return true
				}
				if *skip {
					return false
				}
			}
			*skip = true
			return false
		case '?':
			s = s[1:]
		case '[':
			var ok bool
			if p, ok = class(p[1:], s[0], nocase); !ok {
				return false
			}
			s = s[1:]
			if len(s) == 0 {
				return len(skipStars(p)) == 0
			}
			continue
		default:
			if p[0] == '\\' && len(p) >= 2 {
				p = p[1:]
			}
			if !same(p[0], s[0], nocase) {
				return false
			}
			s = s[1:]
		}
		p = p[1:]
		if len(s) == 0 {
			p = skipStars(p)
		}
	}
	return len(p) == 0 && len(s) == 0
}

// skipStars drops the *s that start p: they match the empty rest of a
// string.
func skipStars(p []byte) []byte {
	for len(p) > 0 && p[0] == '*' {
		p = p[1:]
	}
	return p
}

// class matches c against the class whose body starts p (just past the
// '['). It returns the pattern after the class's closing ']' (or nothing,
// if it is not closed), and whether c matched.
func class(p []byte, c byte, nocase bool) ([]byte, bool) {
	not := at(p, 0) == '^'
	if not {
		p = p[1:]
	}
	matched := false
	for {
		switch {
		case at(p, 0) == '\\' && len(p) >= 2:
			p = p[1:]
			if p[0] == c {
				matched = true
			}
		case at(p, 0) == ']':
			return p[1:], matched != not
		case len(p) == 0: // unclosed
			return p, matched != not
		case len(p) >= 3 && p[1] == '-':
			start, end, x := int(int8(p[0])), int(int8(p[2])), int(int8(c))
			if start > end {
				start, end = end, start
			}
			if nocase {
				start, end, x = lower(start), lower(end), lower(x)
			}
			p = p[2:]
			if start <= x && x <= end {
				matched = true
			}
		default:
			if same(p[0], c, nocase) {
				matched = true
			}
		}
		p = p[1:]
	}
}

func same(a, b byte, nocase bool) bool {
	if nocase {
		return lower(int(a)) == lower(int(b))
	}
	return a == b
}

func lower(c int) int {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
