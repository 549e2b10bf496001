package serving

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cluster-serving/cluster-serving/infer"
)

// The variables that hold the secret and the salt of modelEncrypted and
// recordEncrypted (docs/security.md), or name files that hold them (the
// Docker and Kubernetes secret convention). They are never config keys: a
// config file is logged, copied and committed. The original read the model's
// pair from the Redis hash model_secured (fields secret, salt) and decrypted
// records with a fixed pair; both are the deployer's to set here.
const (
	EnvSecret     = "CLUSTER_SERVING_SECRET"
	EnvSalt       = "CLUSTER_SERVING_SALT"
	EnvSecretFile = "CLUSTER_SERVING_SECRET_FILE"
	EnvSaltFile   = "CLUSTER_SERVING_SALT_FILE"
)

// ErrNoSecret means modelEncrypted or recordEncrypted is set but the
// environment holds no secret or no salt; the message names the variables.
var ErrNoSecret = errors.New("serving: modelEncrypted and recordEncrypted need a secret and a salt: set " +
	EnvSecret + " and " + EnvSalt + ", or " + EnvSecretFile + " and " + EnvSaltFile + " (files holding them)")

// SetKeys derives the key of modelEncrypted and recordEncrypted once (the
// 65536 PBKDF2 rounds take about 50 ms) and sets it where c uses it:
// Unit.Engine.ModelKey when c loads or describes models (Serve, Describe),
// Unit.Engine.RecordKey when it serves. A node that needs no key (a door
// only) looks nothing up, so doors run without the secret. getenv looks up
// the variables (cmd passes os.Getenv). Errors name variables and files,
// never their contents.
func (f *File) SetKeys(c *Config, getenv func(string) string) error {
	model := f.ModelEncrypted && (c.Serve || c.Describe)
	record := f.RecordEncrypted && c.Serve
	if !model && !record {
		return nil
	}
	key, err := DeriveKey(getenv)
	if err != nil {
		return err
	}
	if model {
		c.Unit.Engine.ModelKey = key
	}
	if record {
		c.Unit.Engine.RecordKey = key
	}
	return nil
}

// ModelKey is the key of modelEncrypted (see DeriveKey), or nil when the
// model is plain.
func (f *File) ModelKey(getenv func(string) string) (*infer.Key, error) {
	if !f.ModelEncrypted {
		return nil, nil
	}
	return DeriveKey(getenv)
}

// DeriveKey derives the key of the secret and salt that getenv finds
// (EnvSecret or the file EnvSecretFile names, EnvSalt or EnvSaltFile). A
// missing one returns ErrNoSecret; both a variable and its file set is an
// error too.
func DeriveKey(getenv func(string) string) (*infer.Key, error) {
	secret, err := lookupSecret(getenv, EnvSecret, EnvSecretFile)
	if err != nil {
		return nil, err
	}
	salt, err := lookupSecret(getenv, EnvSalt, EnvSaltFile)
	if err != nil {
		return nil, err
	}
	if secret == "" || salt == "" {
		return nil, ErrNoSecret
	}
	return infer.DeriveKey(secret, salt)
}

// lookupSecret is the value of env, or the content of the file fileEnv
// names without one trailing newline (as `echo` and editors leave it).
func lookupSecret(getenv func(string) string, env, fileEnv string) (string, error) {
	v, path := getenv(env), getenv(fileEnv)
	switch {
	case v != "" && path != "":
		return "", fmt.Errorf("serving: both %s and %s are set; set one", env, fileEnv)
	case path == "":
		return v, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("serving: %s: %w", fileEnv, err)
	}
	s := string(b)
	if t, ok := strings.CutSuffix(s, "\n"); ok {
		s = strings.TrimSuffix(t, "\r")
	}
	if s == "" {
		return "", fmt.Errorf("serving: %s: %q is empty", fileEnv, path)
	}
	return s, nil
}
