package door_test

import (
	"bytes"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	"github.com/cluster-serving/cluster-serving/bridge/door/doortest"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
)

// Planted tokens: none may show in an error or the log.
const (
	inferToken = "planted-infer-7c1e05"
	adminToken = "planted-admin-93d2aa"
	plainToken = "planted-plain-5b6f10"
)

// noPlanted fails t when s holds a planted token.
func noPlanted(t *testing.T, what, s string) {
	t.Helper()
	if strings.Contains(s, "planted") {
		t.Errorf("%s holds a token: %s", what, s)
	}
}

func TestTokenRoles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	doortest.WriteFile(t, path, "# team a\n"+inferToken+"\tinfer\n  "+adminToken+"   admin  \n"+plainToken+"\n")
	tok, err := door.NewTokens(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		token string
		role  door.Role
		infer error // Check(token, RoleInfer)
		admin error // Check(token, RoleAdmin)
	}{
		{inferToken, door.RoleInfer, nil, door.ErrForbidden},
		{plainToken, door.RoleInfer, nil, door.ErrForbidden},
		{adminToken, door.RoleAdmin, nil, nil},
		{"nope", door.RoleNone, door.ErrUnauthenticated, door.ErrUnauthenticated},
		{"", door.RoleNone, door.ErrUnauthenticated, door.ErrUnauthenticated},
		{inferToken + " infer", door.RoleNone, door.ErrUnauthenticated, door.ErrUnauthenticated},
		{"admin", door.RoleNone, door.ErrUnauthenticated, door.ErrUnauthenticated},
	} {
		if got := tok.Role(tc.token); got != tc.role {
			t.Errorf("Role(%q): got %v, want %v", tc.token, got, tc.role)
		}
		if got := tok.Valid(tc.token); got != (tc.role != door.RoleNone) {
			t.Errorf("Valid(%q): got %v, want %v", tc.token, got, !got)
		}
		if got := tok.Check(tc.token, door.RoleInfer); !errors.Is(got, tc.infer) || (got == nil) != (tc.infer == nil) {
			t.Errorf("Check(%q, infer): got %v, want %v", tc.token, got, tc.infer)
		}
		if got := tok.Check(tc.token, door.RoleAdmin); !errors.Is(got, tc.admin) || (got == nil) != (tc.admin == nil) {
			t.Errorf("Check(%q, admin): got %v, want %v", tc.token, got, tc.admin)
		}
	}
}

// TestTokenFileBadRole: a line whose word after the token is no role, or
// with more than two words, is a *FileError naming the line number and
// never the line's words (they may be a token holding a space).
func TestTokenFileBadRole(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"# one\n\n" + inferToken + " root\n", "line 3:"},
		{adminToken + " admin\n" + inferToken + " Admin\n", "line 2:"},
		{inferToken + " planted-second-half\n", "line 1:"},
		{inferToken + " infer admin\n", "line 1:"},
	} {
		path := filepath.Join(t.TempDir(), "tokens")
		doortest.WriteFile(t, path, tc.text)
		_, err := door.NewTokens(path, slog.New(slog.DiscardHandler))
		var fe *door.FileError
		if !errors.As(err, &fe) || fe.Field != "TokenFile" || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "infer or admin") {
			t.Errorf("%q: got %v, want a TokenFile *FileError with %q and the roles", tc.text, err, tc.want)
			continue
		}
		noPlanted(t, "the error", err.Error())
		if strings.Contains(err.Error(), "root") || strings.Contains(err.Error(), "Admin") {
			t.Errorf("the error echoes the line's words: %v", err)
		}
	}
}

// TestTokenFileBadRoleLater: a file that turns malformed while the door
// runs keeps the last good set, roles included, with one warning naming
// the line and no token; a fixed file takes over.
func TestTokenFileBadRoleLater(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	doortest.WriteFile(t, path, adminToken+" admin\n")
	var logs bytes.Buffer
	tok, err := door.NewTokens(path, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	doortest.WriteFile(t, path, inferToken+" superuser\n")
	infertest.WaitFor(t, "a warning about the malformed file", func() bool {
		if tok.Role(adminToken) != door.RoleAdmin {
			t.Fatal("the admin token lost its role while the file is malformed: want the last good set kept")
		}
		return strings.Contains(logs.String(), "line 1:")
	})
	doortest.WriteFile(t, path, adminToken+" infer\n")
	infertest.WaitFor(t, "the admin token demoted", func() bool { return tok.Role(adminToken) == door.RoleInfer })
	noPlanted(t, "the log", logs.String())
	if n := strings.Count(logs.String(), "malformed"); n != 1 {
		t.Errorf("got %d warnings, want 1:\n%s", n, logs.String())
	}
}
