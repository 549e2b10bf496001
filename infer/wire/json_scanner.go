package wire

import (
	"encoding/json"
	"fmt"

	"github.com/cluster-serving/cluster-serving/infer"
)

// scanner is a minimal JSON reader over a byte slice.
type scanner struct {
	b []byte
	i int
}

type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string { return fmt.Sprintf("%s at byte %d", e.msg, e.off) }

func (s *scanner) errorf(format string, args ...any) error {
	return &syntaxError{off: s.i, msg: fmt.Sprintf(format, args...)}
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// object reads {"k": v, ...}, calling f with each key (decoded; valid only
// during the call) positioned before the value, which f must consume.
func (s *scanner) object(f func(key []byte) error) error {
	if empty, err := s.open('{', '}', "an object"); empty || err != nil {
		return err
	}
	for {
		s.ws()
		key, err := s.str()
		if err != nil {
			return err
		}
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return s.errorf("want : after object key")
		}
		s.i++
		if err := f(key); err != nil {
			return err
		}
		s.ws()
		if s.i >= len(s.b) {
			return s.errorf("unexpected end of input in object")
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return s.errorf("want , or } in object, got %q", s.b[s.i])
		}
	}
}

// array reads [v, ...], calling f with each element's index positioned
// before it; f must consume the element.
func (s *scanner) array(f func(i int) error) error {
	if empty, err := s.open('[', ']', "an array"); empty || err != nil {
		return err
	}
	for n := 0; ; n++ {
		if err := f(n); err != nil {
			return err
		}
		if end, err := s.arrayNext(); end || err != nil {
			return err
		}
	}
}

// arrayNext reads what follows an array element: a ',' before the next
// one, or the array's closing ']' (end).
func (s *scanner) arrayNext() (end bool, err error) {
	s.ws()
	if s.i >= len(s.b) {
		return false, s.errorf("unexpected end of input in array")
	}
	switch s.b[s.i] {
	case ',':
		s.i++
		return false, nil
	case ']':
		s.i++
		return true, nil
	}
	return false, s.errorf("want , or ] in array, got %q", s.b[s.i])
}

// open reads the opening byte of an object or array (what names it in
// the error), and the closing byte right after it when it is empty.
func (s *scanner) open(opening, closing byte, what string) (empty bool, err error) {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != opening {
		return false, s.errorf("want %s", what)
	}
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == closing {
		s.i++
		return true, nil
	}
	return false, nil
}

// str reads a JSON string and returns its decoded bytes.
func (s *scanner) str() ([]byte, error) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, s.errorf("want a string")
	}
	start := s.i
	s.i++
	escaped := false
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '\\':
			escaped = true
			s.i += 2
			continue
		case c == '"':
			s.i++
			raw := s.b[start:s.i]
			if !escaped {
				return raw[1 : len(raw)-1], nil
			}
			var out string
			if err := json.Unmarshal(raw, &out); err != nil {
				return nil, &syntaxError{off: start, msg: "invalid string"}
			}
			return []byte(out), nil
		case c < 0x20:
			return nil, s.errorf("control character in string")
		}
		s.i++
	}
	return nil, s.errorf("unterminated string")
}

// skip consumes one JSON value of any kind, checking its syntax only as far
// as needed to find its end.
func (s *scanner) skip(depth int) error {
	if depth > maxDepth {
		return infer.NewInputError(-1, "", "JSON nested deeper than %d", maxDepth)
	}
	s.ws()
	if s.i >= len(s.b) {
		return s.errorf("unexpected end of input")
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(func([]byte) error { return s.skip(depth + 1) })
	case c == '[':
		return s.array(func(int) error { return s.skip(depth + 1) })
	case c == '"':
		_, err := s.str()
		return err
	default:
		start := s.i
		for s.i < len(s.b) && isValueByte(s.b[s.i]) {
			s.i++
		}
		if s.i == start {
			return s.errorf("unexpected %q", c)
		}
		w := s.b[start:s.i]
		switch string(w) {
		case "true", "false", "null":
			return nil
		}
		if !jsonNumber(w) {
			return &syntaxError{off: start, msg: fmt.Sprintf("invalid value %q", truncate(w))}
		}
		return nil
	}
}

// skipFast finds the end of a value by matching brackets, without checking
// its syntax: callers decode the value afterwards, which checks it.
func (s *scanner) skipFast() error {
	s.ws()
	if s.i >= len(s.b) {
		return s.errorf("unexpected end of input")
	}
	switch s.b[s.i] {
	case '[', '{':
	default:
		return s.skip(0)
	}
	depth := 0
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '[', '{':
			depth++
			if depth > maxDepth {
				return infer.NewInputError(-1, "", "JSON nested deeper than %d", maxDepth)
			}
		case ']', '}':
			depth--
			if depth == 0 {
				s.i++
				return nil
			}
		case '"':
			if _, err := s.str(); err != nil {
				return err
			}
			continue
		}
		s.i++
	}
	return s.errorf("unexpected end of input")
}

func truncate(b []byte) string {
	if len(b) > 32 {
		return string(b[:32]) + "..."
	}
	return string(b)
}
