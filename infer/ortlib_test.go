package infer_test

import (
	"path/filepath"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer/infertest"
)

// requireORT initialises ONNX Runtime for the test (see infertest).
func requireORT(tb testing.TB) { infertest.RequireLibrary(tb) }

// model returns the path of a committed test model.
func model(name string) string {
	return filepath.Join("testdata", name+".onnx")
}
