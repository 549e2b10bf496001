package serving

import (
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer/infertest"
)

const (
	testSecret = "planted-secret-6f1c"
	testSalt   = "planted-salt-93ab"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestEncryptedParses checks modelEncrypted and recordEncrypted are accepted
// (they were refused before encryption existed).
func TestEncryptedParses(t *testing.T) {
	f, err := ParseFile([]byte("modelPath: m\nmodelEncrypted: true\nrecordEncrypted: true\n"))
	if err != nil {
		t.Fatalf("got %v, want the file to parse", err)
	}
	if !f.ModelEncrypted || !f.RecordEncrypted {
		t.Errorf("got modelEncrypted %v recordEncrypted %v, want both true", f.ModelEncrypted, f.RecordEncrypted)
	}
}

// TestSetKeys checks which node gets which key, where the secret comes from,
// and that a missing secret names the variables.
func TestSetKeys(t *testing.T) {
	dir := t.TempDir()
	secretFile, saltFile := filepath.Join(dir, "secret"), filepath.Join(dir, "salt")
	if err := os.WriteFile(secretFile, []byte(testSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(saltFile, []byte(testSalt+"\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{EnvSecret: testSecret, EnvSalt: testSalt}
	files := map[string]string{EnvSecretFile: secretFile, EnvSaltFile: saltFile}
	tests := []struct {
		name                string
		model, record       bool
		serve, describe     bool
		env                 map[string]string
		wantModel, wantRec  bool
		wantErr, wantErrHas string
	}{
		{name: "plain", serve: true, env: nil},
		{name: "model, serving", model: true, serve: true, env: vars, wantModel: true},
		{name: "record, serving", record: true, serve: true, env: files, wantRec: true},
		{name: "both, describing", model: true, record: true, describe: true, env: vars, wantModel: true},
		{name: "door only needs nothing", model: true, record: true, env: nil},
		{name: "no secret", record: true, serve: true, env: map[string]string{EnvSalt: testSalt}, wantErrHas: EnvSecretFile},
		{name: "both ways set", model: true, serve: true, env: map[string]string{EnvSecret: "a", EnvSecretFile: secretFile, EnvSalt: "b"}, wantErrHas: "set one"},
		{name: "missing file", model: true, serve: true, env: map[string]string{EnvSecretFile: filepath.Join(dir, "nope"), EnvSalt: "b"}, wantErrHas: EnvSecretFile},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &File{ModelEncrypted: tt.model, RecordEncrypted: tt.record}
			c := Config{Serve: tt.serve, Describe: tt.describe}
			err := f.SetKeys(&c, envOf(tt.env))
			if tt.wantErrHas != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErrHas) {
					t.Fatalf("got %v, want an error naming %q", err, tt.wantErrHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Unit.Engine.ModelKey != nil; got != tt.wantModel {
				t.Errorf("ModelKey set: got %v, want %v", got, tt.wantModel)
			}
			if got := c.Unit.Engine.RecordKey != nil; got != tt.wantRec {
				t.Errorf("RecordKey set: got %v, want %v", got, tt.wantRec)
			}
		})
	}
}

// TestSecretFileIsTheVariable checks a file with its trailing newline gives
// the key of the variable, so the two ways agree.
func TestSecretFileIsTheVariable(t *testing.T) {
	dir := t.TempDir()
	secretFile, saltFile := filepath.Join(dir, "secret"), filepath.Join(dir, "salt")
	_ = os.WriteFile(secretFile, []byte(testSecret+"\n"), 0o600)
	_ = os.WriteFile(saltFile, []byte(testSalt), 0o600)
	fromFiles, err := DeriveKey(envOf(map[string]string{EnvSecretFile: secretFile, EnvSaltFile: saltFile}))
	if err != nil {
		t.Fatal(err)
	}
	// Python encrypts under the pair itself; the files' key must open it.
	text := infertest.EncryptLikeOriginal(t, "record", testSecret, testSalt, []byte("probe"))
	raw, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := fromFiles.Open(raw); err != nil || string(got) != "probe" {
		t.Errorf("the files' key: got %q, %v, want to open what Python sealed under the variables' pair", got, err)
	}
}

// TestNoSecretInErrorsOrLogs plants a secret and checks no error and no
// log of the file or of a Config with its keys shows it.
func TestNoSecretInErrorsOrLogs(t *testing.T) {
	f := &File{ModelPath: "m", ModelEncrypted: true, RecordEncrypted: true}
	c := Config{Serve: true}
	if err := f.SetKeys(&c, envOf(map[string]string{EnvSecret: testSecret, EnvSalt: testSalt})); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	log.Debug("effective config", "config", f, "node", c, "engine", c.Unit.Engine)
	fmt.Fprintf(&out, "%v %+v %#v", c, c.Unit.Engine, c.Unit.Engine)
	bad := []map[string]string{
		{EnvSecret: testSecret},
		{EnvSecret: testSecret, EnvSecretFile: "/x", EnvSalt: testSalt},
		{EnvSecretFile: "/nonexistent/" + "dir", EnvSalt: testSalt},
	}
	for _, env := range bad {
		if _, err := DeriveKey(envOf(env)); err != nil {
			out.WriteString(err.Error())
		} else {
			t.Errorf("DeriveKey(%v): got no error", env)
		}
	}
	if _, err := DeriveKey(envOf(map[string]string{EnvSecret: testSecret})); !errors.Is(err, ErrNoSecret) {
		t.Errorf("no salt: got %v, want ErrNoSecret", err)
	}
	for _, planted := range []string{testSecret, testSalt} {
		if strings.Contains(out.String(), planted) {
			t.Fatalf("%q shows in: %s", planted, out.String())
		}
	}
}
