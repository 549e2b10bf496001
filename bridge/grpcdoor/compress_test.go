package grpcdoor_test

import (
	"slices"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	grpcdoor "github.com/cluster-serving/cluster-serving/bridge/grpcdoor"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// TestCompression: a request compressed with gzip or deflate (the
// grpc-encodings tritonclient's compression_algorithm sends) is answered
// as the plain one, and a deflate bomb past MaxRecvBytes is
// ResourceExhausted, not decompressed whole.
func TestCompression(t *testing.T) {
	addr := startDoor(t, grpcdoor.Config{MaxRecvBytes: 1 << 20, Config: door.Config{}}, served{name: "add", file: "add_f32"})
	c, ctx := inferClient(t, addr), callCtx(t)
	req := &kservepb.ModelInferRequest{ModelName: "add", Inputs: []*inferInput{
		{Name: "x", Datatype: "FP32", Shape: []int64{1, 4}, Contents: &kservepb.InferTensorContents{Fp32Contents: []float32{1, 2, 3, 4}}}}}
	plain, err := c.ModelInfer(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for _, enc := range []string{"gzip", "deflate"} {
		resp, err := c.ModelInfer(ctx, req, grpc.UseCompressor(enc))
		if err != nil {
			t.Fatalf("%s: %v", enc, err)
		}
		if got, want := outputs(t, resp)[0], outputs(t, plain)[0]; !slices.Equal(got.Data.([]float32), want.Data.([]float32)) {
			t.Errorf("%s: got %v, want %v", enc, got.Data, want.Data)
		}
	}
	// 8 MiB of zeros compresses to a few KiB; the door stops at 1 MiB.
	bomb := &kservepb.ModelInferRequest{ModelName: "add", Inputs: []*inferInput{{Name: "x", Datatype: "FP32", Shape: []int64{1 << 19, 4}}},
		RawInputContents: [][]byte{make([]byte, 8<<20)}}
	if _, err := c.ModelInfer(ctx, bomb, grpc.UseCompressor("deflate")); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("deflate bomb: got %v, want ResourceExhausted", err)
	}
}
