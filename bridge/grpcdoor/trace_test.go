package grpcdoor_test

import (
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/cluster-serving/cluster-serving/bridge/door/doortest"
	grpcdoor "github.com/cluster-serving/cluster-serving/bridge/grpcdoor"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// TestTraceFromMetadata: a traceparent in the call's metadata makes the
// door's server span the caller's child, and the mesh continues that
// trace to the worker, for a ModelInfer and for each request of a
// ModelStreamInfer.
func TestTraceFromMetadata(t *testing.T) {
	spans := meshtest.CaptureSpans(t)
	addr := startDoor(t, grpcdoor.Config{}, served{name: "add", file: "add_f32"})
	ctx := metadata.AppendToOutgoingContext(callCtx(t), "traceparent", doortest.Traceparent)
	_, err := inferClient(t, addr).ModelInfer(ctx, &kservepb.ModelInferRequest{ModelName: "add", Inputs: []*inferInput{
		{Name: "x", Datatype: "FP32", Shape: []int64{1, 4}, Contents: &kservepb.InferTensorContents{Fp32Contents: []float32{1, 2, 3, 4}}}}})
	if err != nil {
		t.Fatal(err)
	}
	const door = "inference.GRPCInferenceService/ModelInfer"
	ended := spans.Wait(t, door, telemetry.SpanProcess)
	doortest.CheckTraceContinued(t, ended, door)

	// A request of a stream has a span of its own, the stream caller's
	// child, which the mesh continues. (One test per package: the door's
	// tracer takes the first provider CaptureSpans sets.)
	n := len(ended)
	r, err := streamOnce(ctx, inferClient(t, addr), addRequest("add", "s", 1))
	if err != nil || r.ErrorMessage != "" {
		t.Fatalf("ModelStreamInfer: got %v %v", r, err)
	}
	const streamed = "inference.GRPCInferenceService/ModelStreamInfer"
	meshtest.WaitFor(t, "the streamed request's spans", func() bool {
		ended = spans.All()[n:]
		return ended.Find(streamed) != nil && ended.Find(telemetry.SpanProcess) != nil
	})
	doortest.CheckTraceContinued(t, ended, streamed)
}
