package grpcdoor_test

import (
	"reflect"
	"slices"
	"strings"
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
