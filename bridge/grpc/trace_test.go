package grpcdoor_test

import (
	"testing"

	"google.golang.org/grpc/metadata"

	grpcdoor "github.com/cluster-serving/cluster-serving/bridge/grpc"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// TestTraceFromMetadata: a traceparent in the call's metadata makes the
// door's server span the caller's child, and the mesh continues that
// trace to the worker.
func TestTraceFromMetadata(t *testing.T) {
	spans := meshtest.CaptureSpans(t)
	addr := startDoor(t, grpcdoor.Config{}, served{name: "add", file: "add_f32"})
	const traceID, parentID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	ctx := metadata.AppendToOutgoingContext(callCtx(t), "traceparent", "00-"+traceID+"-"+parentID+"-01")
	_, err := inferClient(t, addr).ModelInfer(ctx, &kservepb.ModelInferRequest{ModelName: "add", Inputs: []*inferInput{
		{Name: "x", Datatype: "FP32", Shape: []int64{1, 4}, Contents: &kservepb.InferTensorContents{Fp32Contents: []float32{1, 2, 3, 4}}}}})
	if err != nil {
		t.Fatal(err)
	}
	const door = "inference.GRPCInferenceService/ModelInfer"
	ended := spans.Wait(t, door, telemetry.SpanProcess)
	d, pub, proc := ended.Find(door), ended.Find(telemetry.SpanPublish), ended.Find(telemetry.SpanProcess)
	if d.SpanContext.TraceID().String() != traceID || d.Parent.SpanID().String() != parentID {
		t.Errorf("door span: got trace %s parent %s, want %s %s", d.SpanContext.TraceID(), d.Parent.SpanID(), traceID, parentID)
	}
	if pub == nil || pub.Parent.SpanID() != d.SpanContext.SpanID() {
		t.Errorf("jetstream publish: want the child of the door's span, got %+v", pub)
	}
	if proc.SpanContext.TraceID().String() != traceID {
		t.Errorf("worker span: got trace %s, want %s", proc.SpanContext.TraceID(), traceID)
	}
}
