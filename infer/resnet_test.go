package infer_test

import (
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
)

// TestResNet50Generator checks that gen_models.py --resnet50 writes a model
// with the documented interface whose outputs stay finite on small images.
// The model is about 100 MB, so it is generated into a temp dir, not kept.
func TestResNet50Generator(t *testing.T) {
	if testing.Short() {
		t.Skip("generates a 100 MB model; skipped with -short")
	}
	requireORT(t)
	const py = "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import onnx, numpy").Run(); err != nil {
		if os.Getenv("CLUSTER_SERVING_REQUIRE_DEPS") == "1" {
			t.Fatalf("python3-onnx and python3-numpy are needed: %v", err)
		}
		t.Skip("python3-onnx / python3-numpy not installed (apt-get install python3-onnx python3-numpy)")
	}
	path := filepath.Join(t.TempDir(), "resnet50.onnx")
	if out, err := exec.Command(py, "testdata/gen_models.py", "--resnet50", path).CombinedOutput(); err != nil {
		t.Fatalf("gen_models.py --resnet50: %v\n%s", err, out)
	}
	e := newEngine(t, infer.Config{ModelPath: path, Threads: 2})
	in := e.Info().Inputs[0]
	if in.Name != "input" || in.DType != infer.Float32 || len(in.Shape) != 4 || in.Shape[0] != -1 || in.Shape[1] != 3 || in.Shape[2] != -1 || in.Shape[3] != -1 {
		t.Fatalf("input: got %+v, want input float32 [-1 3 -1 -1]", in)
	}
	img := infer.NewTensor(infer.Float32, []int64{3, 64, 64})
	for i, d := 0, img.Data.([]float32); i < len(d); i++ {
		d[i] = float32(i%255) / 255
	}
	out, err := e.Infer(context.Background(), [][]infer.Tensor{{img}, {img}})
	if err != nil {
		t.Fatal(err)
	}
	for i, rec := range out {
		y := rec[0]
		if len(y.Shape) != 1 || y.Shape[0] != 1000 {
			t.Fatalf("record %d: got output shape %v, want [1000]", i, y.Shape)
		}
		maxAbs := 0.0
		for _, v := range y.Data.([]float32) {
			maxAbs = math.Max(maxAbs, math.Abs(float64(v)))
		}
		if math.IsNaN(maxAbs) || maxAbs > 1e4 || maxAbs == 0 {
			t.Errorf("record %d: got max |logit| %g, want finite, non-zero and < 1e4", i, maxAbs)
		}
	}
}
