package modelconfig

import "strings"

// The functions below skip over protobuf text format, so that an unknown
// field can be cut out and the parse go on to the next one. Each returns
// an offset in [i, len(s)] and never fails: on text it does not expect it
// stops, and the next strict parse reports what it makes of the rest.

// skipField skips a field: its name, an optional ':', its value and an
// optional ',' or ';'.
func skipField(s string, i int) int {
	if i < 0 || i >= len(s) {
		return i
	}
	if s[i] == '[' {
		i = skipGroup(s, i)
	} else {
		for i < len(s) && isIdent(s[i]) {
			i++
		}
	}
	i = skipSpace(s, i)
	if i < len(s) && s[i] == ':' {
		i = skipSpace(s, i+1)
	}
	i = skipValue(s, i)
	j := skipSpace(s, i)
	if j < len(s) && (s[j] == ',' || s[j] == ';') {
		return j + 1
	}
	return i
}

// skipValue skips a scalar, one or more adjacent strings, or a list or
// message in brackets.
func skipValue(s string, i int) int {
	if i >= len(s) {
		return i
	}
	switch s[i] {
	case '{', '<', '[':
		return skipGroup(s, i)
	case '"', '\'':
		for i < len(s) && (s[i] == '"' || s[i] == '\'') {
			i = skipSpace(s, skipString(s, i))
		}
		return i
	}
	if s[i] == '-' { // a sign may stand apart: "- 1"
		i = skipSpace(s, i+1)
	}
	for i < len(s) && !isSpace(s[i]) && !strings.ContainsRune(",;{}[]<>#\"'", rune(s[i])) {
		i++
	}
	return i
}

// skipGroup skips from an opening bracket to its closing one, over nested
// brackets, strings and comments (to the end of s when it is not closed).
func skipGroup(s string, i int) int {
	depth := 0
	for i < len(s) {
		switch c := s[i]; c {
		case '{', '<', '[':
			depth++
		case '}', '>', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
		case '"', '\'':
			i = skipString(s, i)
			continue
		case '#':
			i = skipSpace(s, i)
			continue
		}
		i++
	}
	return len(s)
}

// skipString skips a quoted string and its escapes (to the end of its
// line when it is not closed).
func skipString(s string, i int) int {
	q := s[i]
	for i++; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case q:
			return i + 1
		case '\n':
			return i
		}
	}
	return len(s)
}

// skipSpace skips white space and '#' comments.
func skipSpace(s string, i int) int {
	for i < len(s) {
		switch {
		case isSpace(s[i]):
			i++
		case s[i] == '#':
			nl := strings.IndexByte(s[i:], '\n')
			if nl < 0 {
				return len(s)
			}
			i += nl + 1
		default:
			return i
		}
	}
	return i
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func isIdent(c byte) bool {
	return c == '_' || c == '.' || c == '/' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}
