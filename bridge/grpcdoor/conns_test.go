package grpcdoor_test

import (
	"testing"

	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	grpcdoor "github.com/cluster-serving/cluster-serving/bridge/grpcdoor"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// TestIdleConnectionsAreShed: with a cap of 3 connections, idle clients
// (one ServerLive each) are shed to admit new ones, a new client's
// ModelInfer is served, and the oldest connection, busy with an open
// reflection stream, is kept.
func TestIdleConnectionsAreShed(t *testing.T) {
	addr := startDoor(t, grpcdoor.Config{Config: door.Config{Conns: door.Conns{MaxConnections: 3}}}, served{name: "add", file: "add_f32"})
	ctx := callCtx(t)
	stream, err := rpb.NewServerReflectionClient(dial(t, addr, nil)).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	list := func() error {
		if err := stream.Send(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{}}); err != nil {
			return err
		}
		_, err := stream.Recv()
		return err
	}
	if err := list(); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		if _, err := inferClient(t, addr).ServerLive(ctx, &kservepb.ServerLiveRequest{}); err != nil {
			t.Fatalf("idle client %d: %v", i, err)
		}
	}
	req := &kservepb.ModelInferRequest{ModelName: "add", Inputs: []*inferInput{
		{Name: "x", Datatype: "FP32", Shape: []int64{1, 4}, Contents: &kservepb.InferTensorContents{Fp32Contents: []float32{1, 2, 3, 4}}}}}
	if _, err := inferClient(t, addr).ModelInfer(ctx, req); err != nil {
		t.Fatalf("a new client past the cap: got %v, want it served", err)
	}
	if err := list(); err != nil {
		t.Errorf("the busy stream, on the oldest connection: got %v, want it kept", err)
	}
}
