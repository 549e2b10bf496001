// Package infertest helps tests that need the real ONNX Runtime library,
// as net/http/httptest helps HTTP tests. It is for _test.go files only.
package infertest

import (
	"os"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
)

// RequireDepsEnv is the variable `make test` sets: with it, a missing test
// dependency (the ONNX Runtime library, redis-server, the shared fixtures)
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
