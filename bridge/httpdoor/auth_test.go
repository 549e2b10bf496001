package httpdoor_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/telemetry/telemetrytest"

	"github.com/cluster-serving/cluster-serving/bridge/door/doortest"
	httpdoor "github.com/cluster-serving/cluster-serving/bridge/httpdoor"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// Planted tokens: none may ever show in the door's log or spans.
const (
	oldToken   = "planted-old-token-7f3a9c"
	newToken   = "planted-new-token-b81d42"
	wrongToken = "planted-wrong-token-c0ffee"
)

// tokenDoor runs a door for add_f32 behind a token file holding oldToken
// and returns it, the file and the door's log.
func tokenDoor(t *testing.T, cfg httpdoor.Config) (*env, string, *telemetrytest.LogBuffer) {
	t.Helper()
	infertest.RequireLibrary(t)
	path := filepath.Join(t.TempDir(), "tokens")
	doortest.WriteFile(t, path, "# clients of team a\n\n   "+oldToken+"   \n#"+wrongToken+"\n")
	logs := &telemetrytest.LogBuffer{}
	cfg.TokenFile, cfg.Logger = path, debugLogger(logs)
	e := startDoor(t, cfg, served{name: "add", file: "add_f32"})
	t.Cleanup(func() {
		for _, tok := range []string{oldToken, newToken, wrongToken} {
			if strings.Contains(logs.String(), tok) {
				t.Errorf("the door's log holds token %q:\n%s", tok, logs.String())
			}
		}
	})
	return e, path, logs
}

func TestBearerTokens(t *testing.T) {
	e, _, _ := tokenDoor(t, httpdoor.Config{})
	for _, tc := range []struct {
		name, method, path, auth, body string
		want                           int
	}{
		{"no header", "POST", "/predict", "", addBody, 401},
		{"wrong token", "POST", "/predict", "Bearer " + wrongToken, addBody, 401},
		{"commented-out token", "POST", "/v2/models/add/infer", "Bearer " + wrongToken, addBody, 401},
		{"token without Bearer", "POST", "/predict", oldToken, addBody, 401},
		{"Basic scheme", "GET", "/models", "Basic " + oldToken, "", 401},
		{"prefix of the token", "GET", "/models", "Bearer " + oldToken[:10], "", 401},
		{"metrics", "GET", "/metrics", "", "", 401},
		{"metadata", "GET", "/v2/models/add", "", "", 401},
		{"unknown route", "GET", "/nope", "", "", 401},
		{"right token", "POST", "/predict", "Bearer " + oldToken, addBody, 200},
		{"model control, infer token", "POST", "/v2/repository/models/add/unload", "Bearer " + oldToken, "", 403},
		{"model control, no token", "POST", "/v2/repository/index", "", "", 401},
		{"right token, lower-case scheme", "GET", "/models", "bearer " + oldToken, "", 200},
		{"welcome", "GET", "/", "", "", 200},
		{"live", "GET", "/v2/health/live", "", "", 200},
		{"ready", "GET", "/v2/health/ready", "", "", 200},
		{"ready, wrong token", "GET", "/v2/health/ready", "Bearer " + wrongToken, "", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, www, body, err := send(httpClient, tc.method, e.url+tc.path, tc.auth, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if st != tc.want {
				t.Fatalf("got %d %s, want %d", st, body, tc.want)
			}
			if st == 403 {
				if msg := errorOf(t, body); strings.Contains(msg, "planted") || !strings.Contains(msg, "role admin") {
					t.Errorf("the 403: got %q, want one naming role admin and no token", msg)
				}
			}
			if st == 401 {
				if msg := errorOf(t, body); strings.Contains(msg, "planted") {
					t.Errorf("the 401 echoes the token: %s", msg)
				}
				if !strings.HasPrefix(www, "Bearer") {
					t.Errorf("WWW-Authenticate: got %q, want Bearer", www)
				}
			}
		})
	}
}

// accepted reports whether token gets GET /models through.
func accepted(t *testing.T, e *env, token string) bool {
	t.Helper()
	st, _, body, err := send(httpClient, "GET", e.url+"/models", "Bearer "+token, "")
	if err != nil || (st != 200 && st != 401) {
		t.Fatalf("got %d %s %v, want 200 or 401", st, body, err)
	}
	return st == 200
}

func TestTokenFileReread(t *testing.T) {
	e, path, logs := tokenDoor(t, httpdoor.Config{})
	if !accepted(t, e, oldToken) {
		t.Fatal("old token refused before the change")
	}
	doortest.WriteFile(t, path, newToken+"\n")
	meshtest.WaitFor(t, "the new token accepted", func() bool { return accepted(t, e, newToken) })
	if accepted(t, e, oldToken) {
		t.Error("old token still accepted after the file changed")
	}

	// Unreadable: the last good set stays, with one warning.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	// The file is looked at on the way of a request: poll with requests.
	meshtest.WaitFor(t, "a warning about the missing file", func() bool {
		if !accepted(t, e, newToken) {
			t.Fatal("new token refused while the file is missing: want the last good set kept")
		}
		return strings.Contains(logs.String(), "cannot be read")
	})
	// Empty: revokes every token.
	doortest.WriteFile(t, path, "# nobody\n")
	meshtest.WaitFor(t, "the token refused", func() bool { return !accepted(t, e, newToken) })
	doortest.WriteFile(t, path, oldToken+"\n")
	meshtest.WaitFor(t, "the old token back", func() bool { return accepted(t, e, oldToken) })
	if n := strings.Count(logs.String(), "cannot be read"); n != 1 {
		t.Errorf("got %d warnings about the unreadable file, want 1:\n%s", n, logs.String())
	}
}

func TestSpansCarryNoAuthorization(t *testing.T) {
	spans := meshtest.CaptureSpans(t)
	e, _, _ := tokenDoor(t, httpdoor.Config{})
	for _, tok := range []string{oldToken, wrongToken} {
		if _, _, _, err := send(httpClient, "POST", e.url+"/predict", "Bearer "+tok, addBody); err != nil {
			t.Fatal(err)
		}
	}
	var dump []byte
	meshtest.WaitFor(t, "the door's spans", func() bool {
		dump, _ = json.Marshal(spans.All())
		return strings.Count(string(dump), `"POST /predict"`) >= 2
	})
	for _, bad := range []string{oldToken, wrongToken, "Bearer", "uthorization"} {
		if strings.Contains(string(dump), bad) {
			t.Errorf("spans hold %q", bad)
		}
	}
}
