package grpcdoor_test

import (
	"testing"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	grpcdoor "github.com/cluster-serving/cluster-serving/bridge/grpcdoor"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// TestModelStatistics sends requests of known batch sizes over gRPC and
// reads Triton's statistics back: by name, every model (empty name), and
// NotFound for a model or version the door does not serve.
func TestModelStatistics(t *testing.T) {
	addr := startDoor(t, grpcdoor.Config{}, served{name: "add", file: "add_f32"}, served{name: "i64", file: "add_i64"})
	c := inferClient(t, addr)
	ctx := callCtx(t)
	sizes := []int64{1, 2, 2}
	rows := uint64(0)
	for _, b := range sizes {
		rows += uint64(b)
		in := &inferInput{Name: "x", Datatype: "FP32", Shape: []int64{b, 4}, Contents: &kservepb.InferTensorContents{Fp32Contents: make([]float32, 4*b)}}
		if _, err := c.ModelInfer(ctx, &kservepb.ModelInferRequest{ModelName: "add", Inputs: []*inferInput{in}}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := c.ModelStatistics(ctx, &kservepb.ModelStatisticsRequest{Name: "add"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.ModelStats) != 1 {
		t.Fatalf("got %d models, want 1", len(res.ModelStats))
	}
	m := res.ModelStats[0]
	n := uint64(len(sizes))
	if m.Name != "add" || m.Version != "1" || m.InferenceCount != rows || m.ExecutionCount != n || m.InferenceStats.Success.Count != n || m.InferenceStats.Success.Ns == 0 {
		t.Errorf("got %s v%s inference_count %d execution_count %d success %v, want add v1 %d %d {%d, > 0}",
			m.Name, m.Version, m.InferenceCount, m.ExecutionCount, m.InferenceStats.Success, rows, n, n)
	}
	runs := map[uint64]uint64{}
	for _, b := range m.BatchStats {
		runs[b.BatchSize] = b.ComputeInfer.Count
	}
	if runs[1] != 1 || runs[2] != 2 || len(runs) != 2 {
		t.Errorf("batch_stats runs by size: got %v, want map[1:1 2:2]", runs)
	}

	all, err := c.ModelStatistics(ctx, &kservepb.ModelStatisticsRequest{})
	if err != nil || len(all.ModelStats) != 2 {
		t.Errorf("every model: got %v, %v; want add and i64", all, err)
	}
	for _, req := range []*kservepb.ModelStatisticsRequest{{Name: "nope"}, {Name: "add", Version: "9"}} {
		if _, err := c.ModelStatistics(ctx, req); grpcstatus.Code(err) != codes.NotFound {
			t.Errorf("%v: got %v, want NotFound", req, err)
		}
	}
}
