package grpcdoor_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	grpcdoor "github.com/cluster-serving/cluster-serving/bridge/grpcdoor"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// TestTokenBucket: with one token a second and a short acquire timeout,
// the first ModelInfer runs and the next ones, which cannot get a token
// in time, are ResourceExhausted; the metadata RPCs take no token.
func TestTokenBucket(t *testing.T) {
	addr := startDoor(t, grpcdoor.Config{Config: door.Config{TokensPerSecond: 1, TokenAcquireTimeout: 10 * time.Millisecond}}, served{name: "add", file: "add_f32"})
	c, ctx := inferClient(t, addr), callCtx(t)
	req := &kservepb.ModelInferRequest{ModelName: "add", Inputs: []*inferInput{
		{Name: "x", Datatype: "FP32", Shape: []int64{1, 4}, Contents: &kservepb.InferTensorContents{Fp32Contents: []float32{1, 2, 3, 4}}}}}
	var got []codes.Code
	for range 3 {
		_, err := c.ModelInfer(ctx, req)
		got = append(got, status.Code(err))
		if status.Code(err) == codes.ResourceExhausted && !strings.Contains(status.Convert(err).Message(), "too many requests: no token within 10ms (tokensPerSecond 1)") {
			t.Errorf("ResourceExhausted says %q", status.Convert(err).Message())
		}
		if _, err := c.ModelMetadata(ctx, &kservepb.ModelMetadataRequest{Name: "add"}); err != nil {
			t.Errorf("ModelMetadata: %v", err)
		}
	}
	if got[0] != codes.OK || got[1] != codes.ResourceExhausted || got[2] != codes.ResourceExhausted {
		t.Errorf("got codes %v, want [OK ResourceExhausted ResourceExhausted]", got)
	}
}

func TestTokenBucketValidate(t *testing.T) {
	cfg := grpcdoor.Config{Config: door.Config{Addr: "127.0.0.1:0", Models: []grpcdoor.Model{{Name: "m", Job: "m"}}, TokensPerSecond: -1}}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "TokensPerSecond") {
		t.Errorf("got %v, want an error naming TokensPerSecond", err)
	}
}
