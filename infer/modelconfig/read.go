package modelconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/prototext"

	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// FileName is the name of a model's configuration file in its directory,
// as in a Triton model repository.
const FileName = "config.pbtxt"

// Read reads modelDir/config.pbtxt (see Parse). It returns (nil, nil, nil)
// when the file does not exist; a syntax error wraps ErrSyntax and names
// the file's path, line and column; other read errors are returned
// wrapped.
func Read(modelDir string) (cfg *kservepb.ModelConfig, warnings []string, err error) {
	path := filepath.Join(modelDir, FileName)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", path, err)
	}
	return parse(path, b)
}

// Parse reads b, Triton's ModelConfig in protobuf text format. Unknown
// fields do not fail it: they are skipped, and each is named with its line
// and column in a warning ("config.pbtxt: unknown field foo ignored (line
// 3:1)"). Every unknown field is named as long as the value after it is
// one this package can skip (a scalar, a string, a list or a message:
// anything protobuf text format writes); past one it cannot, or past 32
// of them, the rest are ignored with one warning that says where naming
// stopped. A syntax
// error (or an unknown enum value) wraps ErrSyntax and names the line and
// column. Safe for concurrent use.
func Parse(b []byte) (*kservepb.ModelConfig, []string, error) {
	return parse(FileName, b)
}

func parse(file string, b []byte) (*kservepb.ModelConfig, []string, error) {
	cfg := &kservepb.ModelConfig{}
	if err := (prototext.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, cfg); err != nil {
		line, col, msg, ok := position(err)
		if !ok { // unexpected EOF: prototext names no place
			line, col = endOf(b)
		}
		return nil, nil, fmt.Errorf("%w: %s:%d:%d: %s", ErrSyntax, file, line, col, msg)
	}
	return cfg, unknownFields(file, b), nil
}

// maxUnknown bounds the unknown fields named one by one.
const maxUnknown = 32

// unknownFields names the unknown fields of b, which parses without them:
// a strict parse stops at the first, whose value is then blanked out
// (newlines kept, so that later positions stay right) before the next
// parse.
func unknownFields(file string, b []byte) []string {
	var warnings []string
	text, line, col := string(b), 1, 1
	for range maxUnknown {
		err := prototext.Unmarshal([]byte(text), &kservepb.ModelConfig{})
		if err == nil {
			return warnings
		}
		l, c, msg, ok := position(err)
		name, unknown := strings.CutPrefix(msg, "unknown field: ")
		start := offset(text, l, c)
		end := skipField(text, start)
		if !ok || !unknown || start < 0 || end <= start {
			return append(warnings, fmt.Sprintf("%s: unknown fields after line %d:%d, if any, are ignored but not named", file, line, col))
		}
		line, col = l, c
		warnings = append(warnings, fmt.Sprintf("%s: unknown field %s ignored (line %d:%d)", file, name, line, col))
		text = text[:start] + blank(text[start:end]) + text[end:]
	}
	return append(warnings, fmt.Sprintf("%s: more than %d unknown fields ignored, the rest not named", file, maxUnknown))
}

// positionRE finds where prototext's errors say they are.
var positionRE = regexp.MustCompile(`\(line (\d+):(\d+)\): `)

// position splits a prototext error into its line, column and message
// (without protobuf's "proto: " prefix); ok is false when it names no
// position.
func position(err error) (line, col int, msg string, ok bool) {
	s := err.Error()
	m := positionRE.FindStringSubmatchIndex(s)
	if m == nil {
		_, rest, found := strings.Cut(s, "proto:")
		if !found {
			rest = s
		}
		return 0, 0, strings.TrimLeft(rest, " \u00a0"), false
	}
	line, _ = strconv.Atoi(s[m[2]:m[3]])
	col, _ = strconv.Atoi(s[m[4]:m[5]])
	return line, col, s[m[1]:], true
}

// offset is the byte offset of line:col (1-based, col counting runes as
// prototext does) in text, or -1.
func offset(text string, line, col int) int {
	i := 0
	for l := 1; l < line; l++ {
		nl := strings.IndexByte(text[i:], '\n')
		if nl < 0 {
			return -1
		}
		i += nl + 1
	}
	for c := 1; c < col; c++ {
		if i >= len(text) || text[i] == '\n' {
			return -1
		}
		_, size := utf8.DecodeRuneInString(text[i:])
		i += size
	}
	return i
}

// endOf is the line and column just past the end of b.
func endOf(b []byte) (line, col int) {
	line = bytes.Count(b, []byte("\n")) + 1
	return line, utf8.RuneCount(b[bytes.LastIndexByte(b, '\n')+1:]) + 1
}

// blank is s with every rune but newlines turned into a space.
func blank(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' {
			return r
		}
		return ' '
	}, s)
}
