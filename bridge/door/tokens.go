package door

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
)

// tokenRecheck is how long the door trusts its copy of the token file
// before it stats the file again; a changed file is re-read at once.
const tokenRecheck = time.Second

// errNoTokens is FileError's Err for a token file with no token in it.
var errNoTokens = errors.New("holds no token (one per line; blank lines and # comments are skipped): it would refuse every request")

// Role is what a token may do: a line of the token file names it after
// the token. RoleAdmin may do all RoleInfer may, and more.
type Role int

// Roles, from least to most allowed.
const (
	// RoleNone is the role of a string that is no token of the file.
	RoleNone Role = iota
	// RoleInfer (the word infer, or none) may call every route and RPC
	// but model control.
	RoleInfer
	// RoleAdmin (the word admin) may also call model control: the model
	// repository extension's index, load and unload.
	RoleAdmin
)

// String returns the role's word in the token file.
func (r Role) String() string {
	switch r {
	case RoleInfer:
		return "infer"
	case RoleAdmin:
		return "admin"
	}
	return "none"
}

// Errors of Tokens.Check, which the doors map to their own answers.
var (
	// ErrUnauthenticated: the token is none of the file's (HTTP 401,
	// gRPC Unauthenticated).
	ErrUnauthenticated = errors.New("door: missing or invalid bearer token")
	// ErrForbidden: the token is the file's, but its role is short of
	// the one needed (HTTP 403, gRPC PermissionDenied).
	ErrForbidden = errors.New("door: the token's role does not allow this")
)

// token is one line of a token file: the SHA-256 of the token, its role.
type token struct {
	digest [sha256.Size]byte
	role   Role
}

// Tokens holds the SHA-256 and the role of each token of a token file (the doors' config key httpAuthTokenFile) and re-reads the file when its size,
// modification time or identity changes, checked at most every
// tokenRecheck on the way of a request (no goroutine). It is
// safe for concurrent use. Token values are never logged nor put in an
// error: only the file's path, line numbers and the number of tokens are.
//
// A line is a token, then optionally whitespace and its role, infer (the
// default) or admin; blank lines and lines starting with # are skipped.
//
// When the file changes:
//   - unreadable (removed, no permission) or malformed (a line with a
//     word after the token that is no role): the last good set stays in force
//     and one warning is logged until the file can be read again. Failing
//     open would let anyone in; failing closed would lock every client out
//     because of, say, a config management tool replacing the file.
//   - readable but holding no token: nobody is let in (fail closed) and one
//     warning is logged. Emptying the file is how a deployer revokes every
//     token, so the old set must not live on. Replace the file atomically
//     (write a new one, rename it over) so no client sees a half-written one.
type Tokens struct {
	path string
	log  *slog.Logger

	mu      sync.Mutex
	digests []token
	info    os.FileInfo // of the file as last read
	checked time.Time
	broken  bool // a warning about the file was logged and stands
}

// NewTokens reads the token file at path once; an unreadable or empty
// file is a *FileError of field TokenFile. log gets the warnings about
// the file changing later.
func NewTokens(path string, log *slog.Logger) (*Tokens, error) {
	t := &Tokens{path: path, log: log}
	info, err := os.Stat(path)
	if err != nil {
		return nil, &FileError{"TokenFile", path, err}
	}
	d, err := readTokens(path)
	if err != nil {
		return nil, &FileError{"TokenFile", path, err}
	}
	if len(d) == 0 {
		return nil, &FileError{"TokenFile", path, errNoTokens}
	}
	t.digests, t.info, t.checked = d, info, time.Now()
	return t, nil
}

// readTokens returns the digest and role of each token of the file at
// path: one a line, spaces trimmed, blank lines and lines starting with #
// skipped. A line of more than two words, or whose second word is no
// role, is an error naming its line number, never its words: they may be
// a token holding a space.
func readTokens(path string) ([]token, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []token
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, len(b)+1)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		words := strings.Fields(line)
		role := RoleInfer
		switch {
		case len(words) == 2 && words[1] == "admin":
			role = RoleAdmin
		case len(words) == 2 && words[1] == "infer":
		case len(words) > 1:
			return nil, fmt.Errorf("line %d: want a token, then optionally a role, infer or admin (a token holds no whitespace)", n)
		}
		out = append(out, token{sha256.Sum256([]byte(words[0])), role})
	}
	return out, sc.Err()
}

// Valid reports whether token is one of the file's, whatever its role.
func (t *Tokens) Valid(token string) bool { return t.Role(token) != RoleNone }

// Role returns the role of token, RoleNone when it is none of the file's.
// Every digest is compared, in constant time, whatever matches: the
// answer's timing tells neither which token nor how much of one matched.
func (t *Tokens) Role(token string) Role {
	d := t.current()
	got := sha256.Sum256([]byte(token))
	role := int(RoleNone)
	for i := range d {
		role = subtle.ConstantTimeSelect(subtle.ConstantTimeCompare(got[:], d[i].digest[:]), int(d[i].role), role)
	}
	if token == "" {
		return RoleNone
	}
	return Role(role)
}

// Check returns nil when token is one of the file's with a role of at
// least need; else ErrUnauthenticated for a token that is none of the
// file's, ErrForbidden for one whose role falls short.
func (t *Tokens) Check(token string, need Role) error {
	switch role := t.Role(token); {
	case role == RoleNone:
		return ErrUnauthenticated
	case role < need:
		return ErrForbidden
	}
	return nil
}

// current returns the tokens in force, re-reading the file first when it
// changed since the last look.
func (t *Tokens) current() []token {
	t.mu.Lock()
	defer t.mu.Unlock()
	if time.Since(t.checked) < tokenRecheck {
		return t.digests
	}
	t.checked = time.Now()
	info, err := os.Stat(t.path)
	if err == nil && sameFile(info, t.info) && !t.broken {
		return t.digests
	}
	var d []token
	if err == nil {
		d, err = readTokens(t.path)
	}
	switch {
	case err != nil:
		t.warnOnce("httpAuthTokenFile: the token file cannot be read or is malformed; the tokens read last stay in force", "err", err)
	case len(d) == 0:
		t.digests, t.info = nil, info
		t.warnOnce("httpAuthTokenFile: the token file holds no token; every request needing one is refused")
	default:
		if t.broken {
			t.log.Info("httpAuthTokenFile: the token file is in order again", "file", t.path, "tokens", len(d))
		}
		t.digests, t.info, t.broken = d, info, false
		t.log.Debug("httpAuthTokenFile: token file re-read", "file", t.path, "tokens", len(d))
	}
	return t.digests
}

func (t *Tokens) warnOnce(msg string, args ...any) {
	if !t.broken {
		t.log.Warn(msg, append([]any{"file", t.path}, args...)...)
	}
	t.broken = true
}

// sameFile reports whether a and b are the same file, unchanged.
func sameFile(a, b os.FileInfo) bool {
	return b != nil && os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}
