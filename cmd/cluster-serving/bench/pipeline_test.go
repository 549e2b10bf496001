package bench

import (
	"math"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
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

// TestChainConfig: a three-step chain feeds each step the previous one's
// output, the first the ensemble's input, and answers the last's.
func TestChainConfig(t *testing.T) {
	got := chainConfig("c", 4, "x", "[ 4 ]", "y", "[ 4 ]", "a", "b", "c")
	for _, want := range []string{
		`model_name: "a" model_version: -1 input_map { key: "x" value: "x" } output_map { key: "y" value: "t0" } },`,
		`model_name: "b" model_version: -1 input_map { key: "x" value: "t0" } output_map { key: "y" value: "t1" } },`,
		`model_name: "c" model_version: -1 input_map { key: "x" value: "t1" } output_map { key: "y" value: "y" } }` + "\n] }",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("config lacks %q:\n%s", want, got)
		}
	}
}

// TestPipelineSample runs `bench -only pipeline` for a second per run
// against the real binary (built here), the real ONNX Runtime and a
// generated repository: every row answers, with no errors, and each
// figure prints. It checks no timing.
func TestPipelineSample(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs serving processes for about a minute")
	}
	infertest.RequireLibrary(t)
	bin := filepath.Join(t.TempDir(), "cluster-serving")
	if out, err := exec.Command("go", "build", "-o", bin, "..").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var b strings.Builder
	r := &runner{w: &b, bin: bin, storage: "memory"}
	o := &options{tiny: infertest.Model("add_f32"), d: time.Second, batch: 8, threads: 1}
	if err := r.pipeline(o); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	out := b.String()
	t.Log(out)
	for _, want := range []string{
		"tiny: one-step ensemble / direct, req/s at 32 callers:",
		"3-step pipeline p50",
		"slow step on 3 worker processes / on 1, pipeline req/s at 32 callers:",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(out, "last error") {
		t.Errorf("a row had errors")
	}
}
