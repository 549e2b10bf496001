package door

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
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

// Tokens holds the SHA-256 of each token of a token file (the doors' config key httpAuthTokenFile) and re-reads the file when its size,
// modification time or identity changes, checked at most every
// tokenRecheck on the way of a request (no goroutine). It is
// safe for concurrent use. Token values are never logged nor put in an
// error: only the file's path and the number of tokens are.
//
// When the file changes:
//   - unreadable (removed, no permission): the last good set stays in force
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
	digests [][sha256.Size]byte
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

// readTokens returns the digest of each token of the file at path: one a
// line, spaces trimmed, blank lines and lines starting with # skipped.
func readTokens(path string) ([][sha256.Size]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out [][sha256.Size]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, len(b)+1)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, sha256.Sum256([]byte(line)))
	}
	return out, sc.Err()
}

// Valid reports whether token is one of the file's. Every digest is
// compared, in constant time, whatever matches: the answer's timing tells
// neither which token nor how much of one matched.
func (t *Tokens) Valid(token string) bool {
	d := t.current()
	got := sha256.Sum256([]byte(token))
	ok := 0
	for i := range d {
		ok |= subtle.ConstantTimeCompare(got[:], d[i][:])
	}
	return ok == 1 && token != ""
}

// current returns the token digests in force, re-reading the file first
// when it changed since the last look.
func (t *Tokens) current() [][sha256.Size]byte {
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
	var d [][sha256.Size]byte
	if err == nil {
		d, err = readTokens(t.path)
	}
	switch {
	case err != nil:
		t.warnOnce("httpAuthTokenFile: the token file cannot be read; the tokens read last stay in force", "err", err)
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
