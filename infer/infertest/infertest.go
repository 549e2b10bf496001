// Package infertest helps tests that need the real ONNX Runtime library,
// as net/http/httptest helps HTTP tests. It is for _test.go files only.
package infertest

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest/freeport"
)

// RequireDepsEnv is the variable `make test` sets: with it, a missing test
// dependency (the ONNX Runtime library, redis-server, python3)
// fails the test instead of skipping it, since a skip in CI is a broken
// setup, not a pass.
const RequireDepsEnv = "CLUSTER_SERVING_REQUIRE_DEPS"

// Missing fails tb when RequireDepsEnv is set, else skips it; why should
// say how to install what is missing.
func Missing(tb testing.TB, why string) {
	tb.Helper()
	if os.Getenv(RequireDepsEnv) == "1" {
		tb.Fatal(why)
	}
	tb.Skip(why)
}

// RequireLibrary finds the ONNX Runtime library ($ONNXRUNTIME_LIB, else
// the cache `make ort` fills), initialises it and returns its path. When it
// is missing the test fails or skips (see Missing).
func RequireLibrary(tb testing.TB) string {
	tb.Helper()
	lib, err := infer.FindLibrary("", os.Getenv("ONNXRUNTIME_LIB"))
	if err != nil {
		Missing(tb, "ONNX Runtime library not found ("+err.Error()+"); run `make ort`")
		return ""
	}
	if err := infer.Init(lib); err != nil {
		tb.Fatalf("init ONNX Runtime %q: %v", lib, err)
	}
	return lib
}

// Model returns the path of the committed test model
// infer/testdata/<name>.onnx (see gen_models.py there), from whichever
// package directory the test runs in.
func Model(name string) string {
	return filepath.Join(RepoRoot(), "infer", "testdata", name+".onnx")
}

// Fixture reads rel under infer/testdata/fixtures: the original
// project's payloads and images, copied into the repository (see the
// README there for where they come from).
func Fixture(tb testing.TB, rel string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(RepoRoot(), "infer", "testdata", "fixtures", rel))
	if err != nil {
		tb.Fatalf("read fixture: %v", err)
	}
	return b
}

// RepoRoot is the directory holding go.mod, found upwards from the working
// directory (a test runs in its package's directory); "." when none is.
func RepoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return "."
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return "."
		}
	}
}

// EncryptLikeOriginal encrypts plain as the original's Python side did,
// by running infer/testdata/gen_encrypted.py (hashlib and
// python3-cryptography, independent of infer's Go decryption): mode
// "record" is base64 of IV||AES-GCM||tag (an image of a recordEncrypted
// record), "model" base64 of IV||AES-CBC (a modelEncrypted file). When
// python3 or python3-cryptography is missing the test fails or skips (see
// Missing).
func EncryptLikeOriginal(tb testing.TB, mode, secret, salt string, plain []byte) string {
	tb.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		Missing(tb, "python3 not found; install python3 and python3-cryptography (make deps)")
		return ""
	}
	if err := exec.Command("python3", "-c", "import cryptography").Run(); err != nil {
		Missing(tb, "python3-cryptography not installed (make deps)")
		return ""
	}
	script := filepath.Join(RepoRoot(), "infer", "testdata", "gen_encrypted.py")
	cmd := exec.Command("python3", script, mode, secret, salt)
	cmd.Stdin = bytes.NewReader(plain)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("gen_encrypted.py %s: %v: %s", mode, err, stderr.String())
	}
	return string(out)
}

// NewEngine initialises ONNX Runtime (see RequireLibrary) and loads cfg's
// model; the engine closes at cleanup.
func NewEngine(tb testing.TB, cfg infer.Config) *infer.Engine {
	tb.Helper()
	RequireLibrary(tb)
	e, err := infer.New(cfg)
	if err != nil {
		tb.Fatalf("infer.New(%+v): %v", cfg, err)
	}
	tb.Cleanup(func() { _ = e.Close() })
	return e
}

// NewSession initialises ONNX Runtime (see RequireLibrary) and opens one
// session on the model file, the direct run tests compare against; it
// closes at cleanup.
func NewSession(tb testing.TB, modelFile string) *infer.Session {
	tb.Helper()
	RequireLibrary(tb)
	s, err := infer.NewSession(modelFile, 1)
	if err != nil {
		tb.Fatalf("infer.NewSession(%s): %v", modelFile, err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// OIPResponse is an Open Inference Protocol (v2) inference response as a
// client reads it, for tests to decode an answer into; Data stays raw so
// that a test compares the numbers as they were written.
type OIPResponse struct {
	ModelName    string      `json:"model_name"`
	ModelVersion string      `json:"model_version"`
	ID           string      `json:"id"`
	Outputs      []OIPOutput `json:"outputs"`
}

// OIPOutput is one output tensor of an OIPResponse.
type OIPOutput struct {
	Name     string          `json:"name"`
	Datatype string          `json:"datatype"`
	Shape    []int64         `json:"shape"`
	Data     json.RawMessage `json:"data"`
}

// FreePorts asks the kernel for n distinct free loopback ports (see
// freeport.Take), failing the test when it cannot.
func FreePorts(tb testing.TB, n int) []int {
	tb.Helper()
	ports, err := freeport.Take(n)
	if err != nil {
		tb.Fatalf("free ports: %v", err)
	}
	return ports
}

// FreePort is one free loopback port (see FreePorts).
func FreePort(tb testing.TB) int {
	tb.Helper()
	return FreePorts(tb, 1)[0]
}

// WaitFor polls cond every 10ms until it holds, and fails the test when
// it still does not after 30s; what names the awaited state in the
// failure.
func WaitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
