package bench

import (
	"math"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
)

// TestSlowModel: the generated slow step loads in ONNX Runtime with a
// batch dim, and answers [batch,4] of finite values, the same for the
// same row.
func TestSlowModel(t *testing.T) {
	infertest.RequireLibrary(t)
	path := filepath.Join(t.TempDir(), "slow.onnx")
	if err := writeSlowModel(path); err != nil {
		t.Fatal(err)
	}
	sess, err := infer.NewSession(path, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	in := []infer.Tensor{{DType: infer.Float32, Shape: []int64{2, 4}, Data: []float32{1.5, 2.5, 3.5, 4.5, 1.5, 2.5, 3.5, 4.5}}}
	t0 := time.Now()
	out, err := sess.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("2 records: %s", time.Since(t0))
	y := out[0].Data.([]float32)
	if !slices.Equal(out[0].Shape, []int64{2, 4}) || !slices.Equal(y[:4], y[4:]) {
		t.Fatalf("got %v %v, want [2 4] and two equal rows", out[0].Shape, y)
	}
	for _, v := range y {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("got %v: want finite values", y)
		}
	}
}
