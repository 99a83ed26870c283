package server

// globMatch reports whether str matches the glob pattern pat as Redis's
// stringmatchlen matches it (KEYS, SCAN MATCH): '*' any run of bytes, '?'
// any byte, '[...]' a class (with '^' to negate it, 'a-z' ranges in either
// order, and '\' to quote), and '\' quoting the next byte. Like Redis it
// compares bytes as C's signed chars in ranges, and gives up (no match)
// past 1,000 nested stars, so that a hostile pattern costs bounded time.
func globMatch(pat, str []byte) bool {
	skipLonger := false
	return globMatchAt(pat, str, &skipLonger, 0)
}

func globMatchAt(pat, str []byte, skipLonger *bool, nesting int) bool {
	if nesting > 1000 {
		return false
	}
	for len(pat) > 0 && len(str) > 0 {
		switch pat[0] {
		case '*':
			for len(pat) > 1 && pat[1] == '*' {
				pat = pat[1:]
			}
			if len(pat) == 1 {
				return true
			}
			for ; len(str) > 0; str = str[1:] {
				if globMatchAt(pat[1:], str, skipLonger, nesting+1) {
					return true
				}
				if *skipLonger {
					return false
				}
			}
			// The rest of the pattern matches nowhere in the rest of
			// str: no earlier star can match longer either.
			*skipLonger = true
			return false
		case '?':
			pat, str = pat[1:], str[1:]
		case '[':
			var match bool
			if pat, match = globClass(pat[1:], str[0]); !match {
				return false
			}
			str = str[1:]
		case '\\':
			if len(pat) >= 2 {
				pat = pat[1:]
			}
			fallthrough
		default:
			if pat[0] != str[0] {
				return false
			}
			pat, str = pat[1:], str[1:]
		}
		if len(str) == 0 {
			for len(pat) > 0 && pat[0] == '*' {
				pat = pat[1:]
			}
			break
		}
	}
	return len(pat) == 0 && len(str) == 0
}

// globClass matches b against the class that pat starts (after its '['),
// and returns what follows the class's closing ']' (nothing if it is not
// closed), and whether b matched.
func globClass(pat []byte, b byte) ([]byte, bool) {
	not := len(pat) > 0 && pat[0] == '^'
	if not {
		pat = pat[1:]
	}
	match := false
	for i := 0; ; i++ {
		switch {
		case i < len(pat) && pat[i] == '\\' && len(pat)-i >= 2:
			i++
			match = match || pat[i] == b
		case i < len(pat) && pat[i] == ']':
			return pat[i+1:], match != not
		case i >= len(pat):
			return nil, match != not
		case len(pat)-i >= 3 && pat[i+1] == '-':
			lo, hi, c := int8(pat[i]), int8(pat[i+2]), int8(b)
			if lo > hi {
				lo, hi = hi, lo
			}
			match = match || (c >= lo && c <= hi)
			i += 2
		default:
			match = match || pat[i] == b
		}
	}
}
