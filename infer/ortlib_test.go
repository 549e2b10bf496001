package infer_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
)

// requireORT initialises ONNX Runtime for the test, or skips it with
// instructions when the library is missing. With
// CLUSTER_SERVING_REQUIRE_DEPS=1 (make test) a missing library fails.
func requireORT(tb testing.TB) {
	tb.Helper()
	lib, err := infer.FindLibrary("", os.Getenv("ONNXRUNTIME_LIB"))
	if err != nil {
		if os.Getenv("CLUSTER_SERVING_REQUIRE_DEPS") == "1" {
			tb.Fatalf("ONNX Runtime library not found (%v); run `make ort`", err)
		}
		tb.Skip("ONNX Runtime library not found; run `make ort`")
	}
	if err := infer.Init(lib); err != nil {
		tb.Fatalf("Init(%q): %v", lib, err)
	}
}

// model returns the path of a committed test model.
func model(name string) string {
	return filepath.Join("testdata", name+".onnx")
}
