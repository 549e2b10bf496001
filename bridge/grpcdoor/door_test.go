package grpcdoor_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	grpcdoor "github.com/cluster-serving/cluster-serving/bridge/grpcdoor"
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

type inferInput = kservepb.ModelInferRequest_InferInputTensor

func TestHealthAndMetadata(t *testing.T) {
	addr := startDoor(t, grpcdoor.Config{Config: door.Config{Version: "1.2.3"}}, served{name: "add", file: "add_f32"}, served{name: "add", version: "2", file: "add_f64"})
	c, ctx := inferClient(t, addr), callCtx(t)
	if r, err := c.ServerLive(ctx, &kservepb.ServerLiveRequest{}); err != nil || !r.Live {
		t.Errorf("ServerLive: got %v %v, want live", r, err)
	}
	if r, err := c.ServerReady(ctx, &kservepb.ServerReadyRequest{}); err != nil || !r.Ready {
		t.Errorf("ServerReady: got %v %v, want ready", r, err)
	}
	if r, err := c.ModelReady(ctx, &kservepb.ModelReadyRequest{Name: "add", Version: "2"}); err != nil || !r.Ready {
		t.Errorf("ModelReady: got %v %v, want ready", r, err)
	}
	h := healthpb.NewHealthClient(dial(t, addr, nil))
	if r, err := h.Check(ctx, &healthpb.HealthCheckRequest{Service: "inference.GRPCInferenceService"}); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("grpc.health.v1 Check: got %v %v, want SERVING", r, err)
	}
	if _, err := h.Check(ctx, &healthpb.HealthCheckRequest{Service: "nope"}); status.Code(err) != codes.NotFound {
		t.Errorf("grpc.health.v1 Check of an unknown service: got %v, want NotFound", err)
	}
	r, err := c.ServerMetadata(ctx, &kservepb.ServerMetadataRequest{})
	if err != nil || r.Name != "cluster-serving" || r.Version != "1.2.3" || !slices.Equal(r.Extensions, door.Extensions(false)) {
		t.Errorf("ServerMetadata: got %v %v, want extensions %v", r, err, door.Extensions(false))
	}
	cfg, err := c.ModelConfig(ctx, &kservepb.ModelConfigRequest{Name: "add", Version: "2"})
	if err != nil || cfg.Config.GetName() != "add" || cfg.Config.Platform != "onnxruntime_onnx" || len(cfg.Config.Input) != 1 ||
		cfg.Config.Input[0].Name != "x" || cfg.Config.Input[0].DataType != kservepb.DataType_TYPE_FP64 {
		t.Errorf("ModelConfig add 2: got %v %v, want add's onnxruntime_onnx config with input x TYPE_FP64", cfg, err)
	}
	tests := []struct {
		name, version string
		want          *kservepb.ModelMetadataResponse
	}{
		{"add", "1", &kservepb.ModelMetadataResponse{Name: "add", Versions: []string{"1", "2"}, Platform: "onnxruntime_onnx",
			Inputs:  []*kservepb.ModelMetadataResponse_TensorMetadata{{Name: "x", Datatype: "FP32", Shape: []int64{-1, 4}}},
			Outputs: []*kservepb.ModelMetadataResponse_TensorMetadata{{Name: "y", Datatype: "FP32", Shape: []int64{-1, 4}}}}},
		{"add", "", &kservepb.ModelMetadataResponse{Name: "add", Versions: []string{"1", "2"}, Platform: "onnxruntime_onnx",
			Inputs:  []*kservepb.ModelMetadataResponse_TensorMetadata{{Name: "x", Datatype: "FP64", Shape: []int64{-1, 4}}},
			Outputs: []*kservepb.ModelMetadataResponse_TensorMetadata{{Name: "y", Datatype: "FP64", Shape: []int64{-1, 4}}}}},
	}
	for _, tt := range tests {
		got, err := c.ModelMetadata(ctx, &kservepb.ModelMetadataRequest{Name: tt.name, Version: tt.version})
		if err != nil || !proto.Equal(got, tt.want) {
			t.Errorf("ModelMetadata %s %q: got %v %v, want %v", tt.name, tt.version, got, err, tt.want)
		}
	}
	for _, call := range []func() error{
		func() error { _, err := c.ModelMetadata(ctx, &kservepb.ModelMetadataRequest{Name: "nope"}); return err },
		func() error { _, err := c.ModelConfig(ctx, &kservepb.ModelConfigRequest{Name: "nope"}); return err },
		func() error {
			_, err := c.ModelConfig(ctx, &kservepb.ModelConfigRequest{Name: "add", Version: "9"})
			return err
		},
	} {
		if err := call(); status.Code(err) != codes.NotFound {
			t.Errorf("unknown model: got %v, want NotFound", err)
		}
	}
	// ModelReady answers an unknown model or version not ready, as
	// Triton does, rather than NotFound.
	for _, req := range []*kservepb.ModelReadyRequest{{Name: "nope"}, {Name: "add", Version: "9"}} {
		if r, err := c.ModelReady(ctx, req); err != nil || r.Ready {
			t.Errorf("ModelReady %s %q: got %v %v, want not ready", req.Name, req.Version, r, err)
		}
	}
}

// outputs decodes a ModelInferResponse's outputs, raw or typed.
func outputs(tb testing.TB, resp *kservepb.ModelInferResponse) []infer.Tensor {
	tb.Helper()
	var out []infer.Tensor
	for i, o := range resp.Outputs {
		dt, _ := wire.OIPDType(o.Datatype)
		if len(resp.RawOutputContents) > 0 {
			t, err := wire.DecodeRaw(resp.RawOutputContents[i], dt, o.Shape, o.Name)
			if err != nil {
				tb.Fatal(err)
			}
			out = append(out, t)
			continue
		}
		c := o.Contents
		var data any
		switch dt {
		case infer.Float32:
			data = c.Fp32Contents
		case infer.Int64:
			data = c.Int64Contents
		case infer.Bool:
			data = c.BoolContents
		default:
			tb.Fatalf("output %s: %s not handled by the test", o.Name, o.Datatype)
		}
		out = append(out, infer.Tensor{DType: dt, Shape: o.Shape, Data: data})
	}
	return out
}

func TestModelInfer(t *testing.T) {
	addr := startDoor(t, grpcdoor.Config{},
		served{name: "add", file: "add_f32"}, served{name: "i64", file: "add_i64"},
		served{name: "f16", file: "identity_f16"}, served{name: "not", file: "not_bool"})
	c, ctx := inferClient(t, addr), callCtx(t)
	tests := []struct {
		name, model, file string
		in                infer.Tensor
		contents          *kservepb.InferTensorContents // nil: raw
	}{
		{"FP32 typed", "add", "add_f32", infer.Tensor{DType: infer.Float32, Shape: []int64{2, 4}, Data: []float32{1, 2, 3, 4, 5, 6, 7, 8.5}}, &kservepb.InferTensorContents{Fp32Contents: []float32{1, 2, 3, 4, 5, 6, 7, 8.5}}},
		{"FP32 raw", "add", "add_f32", infer.Tensor{DType: infer.Float32, Shape: []int64{3, 4}, Data: []float32{1, 2, 3, 4, 5, 6, 7, 8.5, 9, 10, 11, -12}}, nil},
		{"INT64 typed", "i64", "add_i64", infer.Tensor{DType: infer.Int64, Shape: []int64{1, 4}, Data: []int64{1, -2, 3, 1 << 40}}, &kservepb.InferTensorContents{Int64Contents: []int64{1, -2, 3, 1 << 40}}},
		{"FP16 raw", "f16", "identity_f16", infer.Tensor{DType: infer.Float16, Shape: []int64{2, 4}, Data: []infer.F16{0x3c00, 0xc000, 0x7bff, 0x0001, 0x03ff, 0x8000, 0x3555, 0x7c00}}, nil},
		{"BOOL raw", "not", "not_bool", infer.Tensor{DType: infer.Bool, Shape: []int64{1, 4}, Data: []bool{true, false, false, true}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, err := infertest.NewSession(t, infertest.Model(tt.file)).Run([]infer.Tensor{tt.in})
			if err != nil {
				t.Fatal(err)
			}
			req := &kservepb.ModelInferRequest{ModelName: tt.model, Id: "r-" + tt.name,
				Inputs: []*inferInput{{Name: "x", Datatype: wire.OIPDatatype(tt.in.DType), Shape: tt.in.Shape, Contents: tt.contents}}}
			if tt.contents == nil {
				req.RawInputContents = [][]byte{wire.AppendRaw(nil, tt.in)}
			}
			resp, err := c.ModelInfer(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.ModelName != tt.model || resp.ModelVersion != "1" || resp.Id != req.Id || len(resp.Outputs) != 1 || resp.Outputs[0].Name != "y" {
				t.Fatalf("got %v, want model %s version 1 id %s output y", resp, tt.model, req.Id)
			}
			if raw := len(resp.RawOutputContents) > 0; raw != (tt.contents == nil) {
				t.Errorf("raw answer: got %v, want %v as the request", raw, tt.contents == nil)
			}
			got := outputs(t, resp)[0]
			if got.DType != want[0].DType || !slices.Equal(got.Shape, want[0].Shape) || !reflect.DeepEqual(got.Data, want[0].Data) {
				t.Errorf("got %v %v %v, want %v %v %v", got.DType, got.Shape, got.Data, want[0].DType, want[0].Shape, want[0].Data)
			}
		})
	}
}

func TestModelInferErrors(t *testing.T) {
	addr := startDoor(t, grpcdoor.Config{MaxRecvBytes: 4096}, served{name: "add", file: "add_f32"})
	c, ctx := inferClient(t, addr), callCtx(t)
	x := func(shape []int64, v ...float32) []*inferInput {
		return []*inferInput{{Name: "x", Datatype: "FP32", Shape: shape, Contents: &kservepb.InferTensorContents{Fp32Contents: v}}}
	}
	tests := []struct {
		name string
		req  *kservepb.ModelInferRequest
		code codes.Code
		want string
	}{
		{"unknown model", &kservepb.ModelInferRequest{ModelName: "nope", Inputs: x([]int64{1, 4}, 1, 2, 3, 4)}, codes.NotFound, `unknown model "nope"`},
		{"unknown version", &kservepb.ModelInferRequest{ModelName: "add", ModelVersion: "7", Inputs: x([]int64{1, 4}, 1, 2, 3, 4)}, codes.NotFound, `model "add" has no version "7"`},
		{"bad shape", &kservepb.ModelInferRequest{ModelName: "add", Inputs: x([]int64{1, 5}, 1, 2, 3, 4, 5)}, codes.InvalidArgument, "shape [1 5] does not match model [-1 4]"},
		{"short contents", &kservepb.ModelInferRequest{ModelName: "add", Inputs: x([]int64{2, 4}, 1, 2, 3, 4)}, codes.InvalidArgument, "contents.fp32_contents holds 4 elements, FP32 of shape [2 4] needs 8"},
		{"raw size", &kservepb.ModelInferRequest{ModelName: "add", Inputs: []*inferInput{{Name: "x", Datatype: "FP32", Shape: []int64{1, 4}}}, RawInputContents: [][]byte{make([]byte, 15)}}, codes.InvalidArgument, "raw data has 15 bytes"},
		{"too large", &kservepb.ModelInferRequest{ModelName: "add", Inputs: []*inferInput{{Name: "x", Datatype: "FP32", Shape: []int64{1024, 4}}}, RawInputContents: [][]byte{make([]byte, 16384)}}, codes.ResourceExhausted, "larger than max"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.ModelInfer(ctx, tt.req)
			if status.Code(err) != tt.code || !strings.Contains(status.Convert(err).Message(), tt.want) {
				t.Errorf("got %v, want %v with %q", err, tt.code, tt.want)
			}
		})
	}
}

// TestNotReady: until Config.Ready says so, the readiness RPCs say not
// ready and the health service NOT_SERVING; liveness holds.
func TestNotReady(t *testing.T) {
	addr := startDoor(t, grpcdoor.Config{Config: door.Config{Ready: func() bool { return false }}}, served{name: "add", file: "add_f32"})
	cc := dial(t, addr, nil)
	c, ctx := kservepb.NewGRPCInferenceServiceClient(cc), callCtx(t)
	if r, err := c.ServerLive(ctx, &kservepb.ServerLiveRequest{}); err != nil || !r.Live {
		t.Errorf("ServerLive: got %v %v, want live", r, err)
	}
	if r, err := c.ServerReady(ctx, &kservepb.ServerReadyRequest{}); err != nil || r.Ready {
		t.Errorf("ServerReady: got %v %v, want not ready", r, err)
	}
	if r, err := c.ModelReady(ctx, &kservepb.ModelReadyRequest{Name: "add"}); err != nil || r.Ready {
		t.Errorf("ModelReady: got %v %v, want not ready", r, err)
	}
	if r, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || r.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("grpc.health.v1 Check: got %v %v, want NOT_SERVING", r, err)
	}
}

// rawCodec sends and receives messages as their bytes, as a client with a
// broken encoder would.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }
func (rawCodec) Marshal(v any) ([]byte, error) {
	return *v.(*[]byte), nil
}
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}

// TestModelInferBytes: the door routes ModelInfer by the model named in
// the request's bytes and passes them through; bytes that are no proto
// message are InvalidArgument, at the door or at the worker.
func TestModelInferBytes(t *testing.T) {
	addr, door := startDoorAndGet(t, grpcdoor.Config{}, served{name: "add", file: "add_f32"}, served{name: "add", version: "2", file: "add_f64"})
	cc := dial(t, addr, nil)
	ctx := callCtx(t)
	req := &kservepb.ModelInferRequest{ModelName: "add", ModelVersion: "2", Inputs: []*inferInput{
		{Name: "x", Datatype: "FP64", Shape: []int64{1, 4}, Contents: &kservepb.InferTensorContents{Fp64Contents: []float64{1, 2, 3, 4}}}}}
	body, _ := proto.Marshal(req)
	var out []byte
	if err := cc.Invoke(ctx, "/inference.GRPCInferenceService/ModelInfer", &body, &out, grpc.ForceCodec(rawCodec{})); err != nil {
		t.Fatal(err)
	}
	resp := &kservepb.ModelInferResponse{}
	if err := proto.Unmarshal(out, resp); err != nil || resp.ModelVersion != "2" || !reflect.DeepEqual(resp.Outputs[0].Contents.GetFp64Contents(), []float64{3, 5, 7, 9}) {
		t.Errorf("got %v %v, want version 2 and y [3 5 7 9]", resp, err)
	}
	for _, tc := range []struct {
		name string
		body []byte
		want string
	}{
		{"truncated field", []byte{0x0a, 0x05, 'a'}, "malformed ModelInferRequest"},
		// model_name "add", then a truncated inputs field: the door
		// routes it, the worker refuses it.
		{"bad body after the name", append([]byte{0x0a, 0x03, 'a', 'd', 'd'}, 0x2a, 0x09, 0x0a), "malformed ModelInferRequest"},
	} {
		err := cc.Invoke(ctx, "/inference.GRPCInferenceService/ModelInfer", &tc.body, &out, grpc.ForceCodec(rawCodec{}))
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tc.want) {
			t.Errorf("%s: got %v, want InvalidArgument with %q", tc.name, err, tc.want)
		}
	}
	// The typed method, for a caller holding a decoded request.
	typed, err := door.ModelInfer(ctx, req)
	if err != nil || typed.ModelVersion != "2" || !reflect.DeepEqual(typed.Outputs[0].Contents.GetFp64Contents(), []float64{3, 5, 7, 9}) {
		t.Errorf("Door.ModelInfer: got %v %v", typed, err)
	}
}

// addRequest asks model (the add model, y = 2x + 1) for x = base,
// base+1, base+2, base+3, under id.
func addRequest(model, id string, base float32) *kservepb.ModelInferRequest {
	return &kservepb.ModelInferRequest{ModelName: model, Id: id, Inputs: []*inferInput{{Name: "x", Datatype: "FP32", Shape: []int64{1, 4},
		Contents: &kservepb.InferTensorContents{Fp32Contents: []float32{base, base + 1, base + 2, base + 3}}}}}
}

// streamCase is one request of a stream and what its answer must be:
// y for a good one, else an error_message holding want.
type streamCase struct {
	req  *kservepb.ModelInferRequest
	y    []float32
	want string
}

// streamCases are n requests to add interleaving good ones, ones to an
// unknown model and ones with a bad tensor, ids "r0" to "r<n-1>".
func streamCases(n int) []streamCase {
	out := make([]streamCase, n)
	for i := range out {
		id, x := fmt.Sprintf("r%d", i), float32(i)
		switch i % 3 {
		case 0:
			out[i] = streamCase{req: addRequest("add", id, x), y: []float32{2*x + 1, 2*x + 3, 2*x + 5, 2*x + 7}}
		case 1:
			out[i] = streamCase{req: addRequest("nope", id, x), want: `unknown model "nope"`}
		case 2:
			bad := addRequest("add", id, x)
			bad.Inputs[0].Shape = []int64{2, 4}
			out[i] = streamCase{req: bad, want: "contents.fp32_contents holds 4 elements, FP32 of shape [2 4] needs 8"}
		}
	}
	return out
}

// check reports how the answer of a stream differs from tc's.
func (tc streamCase) check(got *kservepb.ModelStreamInferResponse) error {
	r := got.InferResponse
	switch {
	case r.GetId() != tc.req.Id:
		return fmt.Errorf("id %q, want %q", r.GetId(), tc.req.Id)
	case tc.want != "" && !strings.Contains(got.ErrorMessage, tc.want):
		return fmt.Errorf("error_message %q, want one with %q", got.ErrorMessage, tc.want)
	case tc.want == "" && got.ErrorMessage != "":
		return fmt.Errorf("error_message %q, want none", got.ErrorMessage)
	case tc.want == "" && (len(r.Outputs) != 1 || !slices.Equal(r.Outputs[0].Contents.GetFp32Contents(), tc.y)):
		return fmt.Errorf("outputs %v, want y %v", r.Outputs, tc.y)
	}
	return nil
}

// TestStreamInfer: 20 requests sent at once on one stream, good ones
// between requests to an unknown model and ones with a bad tensor, get
// 20 answers in their order, ids echoed, the failures in band; then the
// client half-closes and the stream ends with OK.
func TestStreamInfer(t *testing.T) {
	addr := startDoor(t, grpcdoor.Config{}, served{name: "add", file: "add_f32"})
	stream, err := inferClient(t, addr).ModelStreamInfer(callCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	cases := streamCases(20)
	for _, tc := range cases {
		if err := stream.Send(tc.req); err != nil {
			t.Fatalf("send %s: %v", tc.req.Id, err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		got, err := stream.Recv()
		if err != nil {
			t.Fatalf("answer to %s: %v", tc.req.Id, err)
		}
		if err := tc.check(got); err != nil {
			t.Errorf("answer to %s: %v", tc.req.Id, err)
		}
	}
	if got, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("after the answers: got %v %v, want the stream ended with OK (io.EOF)", got, err)
	}
}

// TestStreamInferInteractive: one request at a time, the stream stays
// usable after each failure, and one more request sent right before the
// half-close is still answered.
func TestStreamInferInteractive(t *testing.T) {
	addr := startDoor(t, grpcdoor.Config{}, served{name: "add", file: "add_f32"})
	stream, err := inferClient(t, addr).ModelStreamInfer(callCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	malformed := &kservepb.ModelInferRequest{ModelName: "add", Id: "m", Inputs: []*inferInput{{Name: "x", Datatype: "FP32", Shape: []int64{1, 4}}},
		RawInputContents: [][]byte{make([]byte, 15)}}
	cases := append(streamCases(6), streamCase{req: malformed, want: "raw data has 15 bytes"})
	cases = append(cases, streamCase{req: addRequest("add", "last", 1), y: []float32{3, 5, 7, 9}})
	for _, tc := range cases[:len(cases)-1] {
		if err := stream.Send(tc.req); err != nil {
			t.Fatalf("send %s: %v", tc.req.Id, err)
		}
		got, err := stream.Recv()
		if err != nil {
			t.Fatalf("answer to %s: %v", tc.req.Id, err)
		}
		if err := tc.check(got); err != nil {
			t.Errorf("answer to %s: %v", tc.req.Id, err)
		}
	}
	last := cases[len(cases)-1]
	if err := stream.Send(last.req); err != nil {
		t.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	got, err := stream.Recv()
	if err != nil {
		t.Fatalf("answer to the request before the half-close: %v", err)
	}
	if err := last.check(got); err != nil {
		t.Errorf("answer to the request before the half-close: %v", err)
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("after the half-close: got %v, want io.EOF", err)
	}
}

// TestStreamInferTooLarge: a message over MaxRecvBytes ends the stream
// with ResourceExhausted, as a unary call gets it, after the answers
// already sent.
func TestStreamInferTooLarge(t *testing.T) {
	addr := startDoor(t, grpcdoor.Config{MaxRecvBytes: 4096}, served{name: "add", file: "add_f32"})
	stream, err := inferClient(t, addr).ModelStreamInfer(callCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(addRequest("add", "small", 1)); err != nil {
		t.Fatal(err)
	}
	if got, err := stream.Recv(); err != nil || got.ErrorMessage != "" || got.InferResponse.GetId() != "small" {
		t.Fatalf("small: got %v %v, want its answer", got, err)
	}
	big := &kservepb.ModelInferRequest{ModelName: "add", Id: "big", Inputs: []*inferInput{{Name: "x", Datatype: "FP32", Shape: []int64{1024, 4}}},
		RawInputContents: [][]byte{make([]byte, 16384)}}
	_ = stream.Send(big) // the server may end the stream before the send returns
	if got, err := stream.Recv(); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("big: got %v %v, want the stream ended with ResourceExhausted", got, err)
	}
}

// streamOnce sends req on a new stream of c, half-closes, and returns
// its one answer, or the stream's error.
func streamOnce(ctx context.Context, c kservepb.GRPCInferenceServiceClient, req *kservepb.ModelInferRequest, opts ...grpc.CallOption) (*kservepb.ModelStreamInferResponse, error) {
	stream, err := c.ModelStreamInfer(ctx, opts...)
	if err != nil {
		return nil, err
	}
	if err := stream.Send(req); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if err := stream.CloseSend(); err != nil {
		return nil, err
	}
	return stream.Recv()
}

// gate is the add model's predictor holding every Predict call until
// release is closed; it counts the calls in Predict now and at most.
type gate struct {
	next         mesh.Predictor
	release      chan struct{}
	mu           sync.Mutex
	inside, peak int
}

func (g *gate) Predict(ctx context.Context, contentType string, body []byte) ([]byte, error) {
	g.mu.Lock()
	g.inside++
	g.peak = max(g.peak, g.inside)
	g.mu.Unlock()
	defer func() { g.mu.Lock(); g.inside--; g.mu.Unlock() }()
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.next.Predict(ctx, contentType, body)
}

func (g *gate) counts() (inside, peak int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inside, g.peak
}

// TestStreamInferConcurrent: the requests of one stream are served at
// once, StreamWindow of them and no more: with 40 sent and the model
// holding each, StreamWindow reach it together (a stream served one at
// a time would never get there); once released, all 40 are answered in
// their order.
func TestStreamInferConcurrent(t *testing.T) {
	infertest.RequireLibrary(t)
	e := infertest.NewEngine(t, infer.Config{ModelPath: infertest.Model("add_f32"), MaxBatch: 8})
	g := &gate{next: wire.NewPredictor(e, wire.Model{Name: "add"}), release: make(chan struct{})}
	addr := startDoor(t, grpcdoor.Config{}, served{name: "add", predictor: g, info: e.Info()})
	stream, err := inferClient(t, addr).ModelStreamInfer(callCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	for i := range n {
		if err := stream.Send(addRequest("add", fmt.Sprintf("r%d", i), float32(i))); err != nil {
			t.Fatalf("send r%d: %v", i, err)
		}
	}
	meshtest.WaitFor(t, "StreamWindow requests in the model at once", func() bool { inside, _ := g.counts(); return inside >= grpcdoor.StreamWindow })
	close(g.release)
	for i := range n {
		got, err := stream.Recv()
		x := float32(i)
		if err == nil {
			err = streamCase{req: addRequest("add", fmt.Sprintf("r%d", i), x), y: []float32{2*x + 1, 2*x + 3, 2*x + 5, 2*x + 7}}.check(got)
		}
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
	}
	if _, peak := g.counts(); peak != grpcdoor.StreamWindow {
		t.Errorf("requests in the model at once: got %d at most, want StreamWindow (%d)", peak, grpcdoor.StreamWindow)
	}
}
