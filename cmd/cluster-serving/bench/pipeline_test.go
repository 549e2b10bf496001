package bench

import (
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/modelconfig"
	"github.com/cluster-serving/cluster-serving/mesh/pipeline"
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
	out, err := sess.Run(in)
	if err != nil {
		t.Fatal(err)
	}
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

// TestChainConfig: a three-step chain is an ensemble Triton's checks
// (pipeline.Build) accept, its steps in order, each fed the previous
// one's output.
func TestChainConfig(t *testing.T) {
	cfg, _, err := modelconfig.Parse([]byte(chainConfig("c", 4, "x", "[ 4 ]", "y", "[ 4 ]", "a", "b", "c")))
	if err != nil {
		t.Fatal(err)
	}
	step, _, err := modelconfig.Parse([]byte(`max_batch_size: 8 input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ] output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]`))
	if err != nil {
		t.Fatal(err)
	}
	g, err := pipeline.Build("c", cfg, func(name string, _ int64) (pipeline.Member, error) {
		return pipeline.Member{Name: name, Version: "1", Job: "j-" + name, Config: step}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, m := range g.Members() {
		order = append(order, m.Name)
	}
	if !slices.Equal(order, []string{"a", "b", "c"}) {
		t.Errorf("steps run %v, want a, b, c", order)
	}
}
