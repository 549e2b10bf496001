package wire_test

import (
	"context"
	"reflect"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

type inferInput = kservepb.ModelInferRequest_InferInputTensor

// grpcOutputs decodes a ModelInferResponse's outputs, raw or typed, into
// tensors; raw reports which form they came in.
func grpcOutputs(tb testing.TB, body []byte) (resp *kservepb.ModelInferResponse, outs []infer.Tensor, raw bool) {
	tb.Helper()
	resp = &kservepb.ModelInferResponse{}
	if err := proto.Unmarshal(body, resp); err != nil {
		tb.Fatal(err)
	}
	raw = len(resp.RawOutputContents) > 0
	for i, o := range resp.Outputs {
		dt, ok := wire.OIPDType(o.Datatype)
		if !ok {
			tb.Fatalf("output %s: datatype %q", o.Name, o.Datatype)
		}
		if raw {
			t, err := wire.DecodeRaw(resp.RawOutputContents[i], dt, o.Shape, o.Name)
			if err != nil {
				tb.Fatal(err)
			}
			outs = append(outs, t)
			continue
		}
		if o.Contents == nil {
			tb.Fatalf("output %s has neither contents nor raw_output_contents", o.Name)
		}
		outs = append(outs, typedTensor(dt, o.Shape, o.Contents))
	}
	return resp, outs, raw
}

// predictGRPC answers req on a Predictor of the test model name and
// decodes the answer (see grpcOutputs).
func predictGRPC(tb testing.TB, name string, req *kservepb.ModelInferRequest) (*kservepb.ModelInferResponse, []infer.Tensor, bool) {
	tb.Helper()
	body, err := proto.Marshal(req)
	if err != nil {
		tb.Fatal(err)
	}
	p := newPredictor(tb, infer.Config{ModelPath: model(name)})
	out, err := p.Predict(context.Background(), wire.MediaTypeKServeGRPC, body)
	if err != nil {
		tb.Fatal(err)
	}
	return grpcOutputs(tb, out)
}

// typedTensor reads typed contents back as the tensor of dt.
func typedTensor(dt infer.DType, shape []int64, c *kservepb.InferTensorContents) infer.Tensor {
	t := infer.NewTensor(dt, shape)
	switch v := t.Data.(type) {
	case []bool:
		copy(v, c.BoolContents)
	case []int8:
		castInto(v, c.IntContents)
	case []int16:
		castInto(v, c.IntContents)
	case []int32:
		copy(v, c.IntContents)
	case []int64:
		copy(v, c.Int64Contents)
	case []uint8:
		castInto(v, c.UintContents)
	case []uint16:
		castInto(v, c.UintContents)
	case []uint32:
		copy(v, c.UintContents)
	case []uint64:
		copy(v, c.Uint64Contents)
	case []float32:
		copy(v, c.Fp32Contents)
	case []float64:
		copy(v, c.Fp64Contents)
	case []string:
		for i := range v {
			v[i] = string(c.BytesContents[i])
		}
	}
	return t
}

// castInto converts the wide ints of a contents field into dst, element
// by element (the test models' values fit).
func castInto[D int8 | int16 | uint8 | uint16, S int32 | uint32](dst []D, src []S) {
	for i := range dst {
		dst[i] = D(src[i])
	}
}

func TestGRPCCodecMatchesSession(t *testing.T) {
	requireORT(t)
	tests := []struct {
		model    string
		in       infer.Tensor
		contents *kservepb.InferTensorContents // nil: send raw
		wantRaw  bool
	}{
		{"add_f32", f32([]int64{2, 4}, 1, 2, 3, 4, 5, 6, 7, 8.5), &kservepb.InferTensorContents{Fp32Contents: []float32{1, 2, 3, 4, 5, 6, 7, 8.5}}, false},
		{"add_f32", f32([]int64{2, 4}, 1, 2, 3, 4, 5, 6, 7, 8.5), nil, true},
		{"add_f64", infer.Tensor{DType: infer.Float64, Shape: []int64{1, 4}, Data: []float64{1, 2, 3, 0.25}}, &kservepb.InferTensorContents{Fp64Contents: []float64{1, 2, 3, 0.25}}, false},
		{"add_i64", infer.Tensor{DType: infer.Int64, Shape: []int64{1, 4}, Data: []int64{1, -2, 3, 4}}, nil, true},
		{"identity_i8", infer.Tensor{DType: infer.Int8, Shape: []int64{1, 4}, Data: []int8{-128, -1, 0, 127}}, &kservepb.InferTensorContents{IntContents: []int32{-128, -1, 0, 127}}, false},
		{"identity_u16", infer.Tensor{DType: infer.Uint16, Shape: []int64{1, 4}, Data: []uint16{0, 1, 65534, 65535}}, &kservepb.InferTensorContents{UintContents: []uint32{0, 1, 65534, 65535}}, false},
		{"identity_u64", infer.Tensor{DType: infer.Uint64, Shape: []int64{1, 4}, Data: []uint64{0, 1, 1 << 63, 1<<64 - 1}}, &kservepb.InferTensorContents{Uint64Contents: []uint64{0, 1, 1 << 63, 1<<64 - 1}}, false},
		{"not_bool", infer.Tensor{DType: infer.Bool, Shape: []int64{1, 4}, Data: []bool{true, false, false, true}}, &kservepb.InferTensorContents{BoolContents: []bool{true, false, false, true}}, false},
		{"identity_f16", infer.Tensor{DType: infer.Float16, Shape: []int64{2, 4}, Data: []infer.F16{0x3c00, 0xc000, 0x7bff, 0, 1, 2, 3, 0x8000}}, nil, true},
		{"identity_bf16", infer.Tensor{DType: infer.BFloat16, Shape: []int64{1, 4}, Data: []infer.BF16{0x3f80, 0xc000, 0x7f7f, 1}}, nil, true},
		// FP32 in as typed contents, FP16 out: FP16 has no typed
		// contents and the protocol allows no mix, so the answer is raw.
		{"cast_f32_f16", f32([]int64{1, 4}, 1, -2, 0.5, 65504), &kservepb.InferTensorContents{Fp32Contents: []float32{1, -2, 0.5, 65504}}, true},
	}
	for _, tt := range tests {
		name := tt.model + "/typed"
		if tt.contents == nil {
			name = tt.model + "/raw"
		}
		t.Run(name, func(t *testing.T) {
			want, err := infertest.NewSession(t, model(tt.model)).Run([]infer.Tensor{tt.in})
			if err != nil {
				t.Fatal(err)
			}
			req := &kservepb.ModelInferRequest{Id: "r1", Inputs: []*inferInput{{Name: "x", Datatype: wire.OIPDatatype(tt.in.DType), Shape: tt.in.Shape, Contents: tt.contents}}}
			if tt.contents == nil {
				req.RawInputContents = [][]byte{wire.AppendRaw(nil, tt.in)}
			}
			resp, outs, raw := predictGRPC(t, tt.model, req)
			if resp.ModelName != "m" || resp.ModelVersion != "1" || resp.Id != "r1" || len(outs) != 1 || resp.Outputs[0].Name != "y" {
				t.Fatalf("got %v, want model m version 1 id r1 and output y", resp)
			}
			if raw != tt.wantRaw {
				t.Errorf("raw answer: got %v, want %v", raw, tt.wantRaw)
			}
			if !slices.Equal(outs[0].Shape, want[0].Shape) || !reflect.DeepEqual(outs[0].Data, want[0].Data) {
				t.Errorf("got %v %v, want %v %v", outs[0].Shape, outs[0].Data, want[0].Shape, want[0].Data)
			}
		})
	}
}

// TestGRPCCodecRequestedOutputs: two inputs in another order than the
// model's, one requested output of two.
func TestGRPCCodecRequestedOutputs(t *testing.T) {
	p := newPredictor(t, infer.Config{ModelPath: model("two_io")})
	req := &kservepb.ModelInferRequest{
		Inputs: []*inferInput{
			{Name: "b", Datatype: "FP32", Shape: []int64{2, 3}, Contents: &kservepb.InferTensorContents{Fp32Contents: []float32{1, 1, 1, 2, 2, 2}}},
			{Name: "a", Datatype: "FP32", Shape: []int64{2, 3}, Contents: &kservepb.InferTensorContents{Fp32Contents: []float32{1, 2, 3, 4, 5, 6}}},
		},
		Outputs: []*kservepb.ModelInferRequest_InferRequestedOutputTensor{{Name: "prod"}},
	}
	body, _ := proto.Marshal(req)
	out, err := p.Predict(context.Background(), wire.MediaTypeKServeGRPC, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, outs, _ := grpcOutputs(t, out)
	if len(outs) != 1 || resp.Outputs[0].Name != "prod" || !reflect.DeepEqual(outs[0].Data, []float32{1, 2, 3, 8, 10, 12}) || !slices.Equal(outs[0].Shape, []int64{2, 3}) {
		t.Errorf("got %v, want prod [2 3] [1 2 3 8 10 12]", resp)
	}
}

func TestGRPCCodecErrors(t *testing.T) {
	requireORT(t)
	x := func(dt string, shape []int64, c *kservepb.InferTensorContents) *inferInput {
		return &inferInput{Name: "x", Datatype: dt, Shape: shape, Contents: c}
	}
	fp32 := func(v ...float32) *kservepb.InferTensorContents {
		return &kservepb.InferTensorContents{Fp32Contents: v}
	}
	tests := []struct {
		name  string
		model string
		req   *kservepb.ModelInferRequest
		body  []byte // instead of req
		want  string
	}{
		{"malformed", "add_f32", nil, []byte{0xff, 0xff, 0xff}, "malformed ModelInferRequest"},
		{"no inputs", "add_f32", &kservepb.ModelInferRequest{}, nil, "no inputs"},
		{"unknown input", "add_f32", &kservepb.ModelInferRequest{Inputs: []*inferInput{{Name: "z", Datatype: "FP32", Shape: []int64{1, 4}, Contents: fp32(1, 2, 3, 4)}}}, nil, `input "z": unknown input`},
		{"bad shape", "add_f32", &kservepb.ModelInferRequest{Inputs: []*inferInput{x("FP32", []int64{1, 5}, fp32(1, 2, 3, 4, 5))}}, nil, "shape [1 5] does not match model [-1 4]"},
		{"datatype", "add_f32", &kservepb.ModelInferRequest{Inputs: []*inferInput{x("INT32", []int64{1, 4}, fp32(1, 2, 3, 4))}}, nil, `datatype "INT32" does not match the model's FP32`},
		{"bytes", "add_f32", &kservepb.ModelInferRequest{Inputs: []*inferInput{x("BYTES", []int64{1, 4}, nil)}, RawInputContents: [][]byte{{1}}}, nil, `datatype "BYTES" does not match the model's FP32`},
		{"count", "add_f32", &kservepb.ModelInferRequest{Inputs: []*inferInput{x("FP32", []int64{1, 4}, fp32(1, 2, 3))}}, nil, "contents.fp32_contents holds 3 elements, FP32 of shape [1 4] needs 4"},
		{"wrong field", "add_f32", &kservepb.ModelInferRequest{Inputs: []*inferInput{x("FP32", []int64{1, 4}, &kservepb.InferTensorContents{IntContents: []int32{1, 2, 3, 4}})}}, nil, "contents.fp32_contents holds 0 elements"},
		{"no contents", "add_f32", &kservepb.ModelInferRequest{Inputs: []*inferInput{x("FP32", []int64{1, 4}, nil)}}, nil, "has no contents"},
		{"both", "add_f32", &kservepb.ModelInferRequest{Inputs: []*inferInput{x("FP32", []int64{1, 4}, fp32(1, 2, 3, 4))}, RawInputContents: [][]byte{make([]byte, 16)}}, nil, "has contents while raw_input_contents is set"},
		{"raw count", "two_io", &kservepb.ModelInferRequest{Inputs: []*inferInput{{Name: "a", Datatype: "FP32", Shape: []int64{1, 3}}, {Name: "b", Datatype: "FP32", Shape: []int64{1, 3}}}, RawInputContents: [][]byte{make([]byte, 12)}}, nil, "raw_input_contents has 1 entries for 2 inputs"},
		{"raw size", "add_f32", &kservepb.ModelInferRequest{Inputs: []*inferInput{x("FP32", []int64{1, 4}, nil)}, RawInputContents: [][]byte{make([]byte, 15)}}, nil, "raw data has 15 bytes, FP32 of shape [1 4] needs 16"},
		{"f16 typed", "identity_f16", &kservepb.ModelInferRequest{Inputs: []*inferInput{x("FP16", []int64{1, 4}, fp32(1, 2, 3, 4))}}, nil, "FP16 has no typed contents: send it in raw_input_contents"},
		{"int8 range", "identity_i8", &kservepb.ModelInferRequest{Inputs: []*inferInput{x("INT8", []int64{1, 4}, &kservepb.InferTensorContents{IntContents: []int32{1, 2, 3, 128}})}}, nil, "element 3: 128 is not a INT8"},
		{"unknown output", "add_f32", &kservepb.ModelInferRequest{Inputs: []*inferInput{x("FP32", []int64{1, 4}, fp32(1, 2, 3, 4))}, Outputs: []*kservepb.ModelInferRequest_InferRequestedOutputTensor{{Name: "nope"}}}, nil, `unknown output "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := tt.body
			if tt.req != nil {
				body, _ = proto.Marshal(tt.req)
			}
			p := newPredictor(t, infer.Config{ModelPath: model(tt.model)})
			wantPredictInputError(t, p, wire.MediaTypeKServeGRPC, body, tt.want)
		})
	}
}

// bytesContents is typed contents of strings.
func bytesContents(v ...string) *kservepb.InferTensorContents {
	c := &kservepb.InferTensorContents{}
	for _, s := range v {
		c.BytesContents = append(c.BytesContents, []byte(s))
	}
	return c
}

func str(shape []int64, v ...string) infer.Tensor {
	return infer.Tensor{DType: infer.String, Shape: shape, Data: v}
}

// TestGRPCCodecBytes sends BYTES tensors through the gRPC codec and the
// real ONNX Runtime, in bytes_contents and framed in raw_input_contents,
// and compares with the session's own answer: a string output comes
// back in bytes_contents for typed requests, raw for raw ones.
func TestGRPCCodecBytes(t *testing.T) {
	requireORT(t)
	type input struct {
		t        infer.Tensor
		contents *kservepb.InferTensorContents // nil: send raw
	}
	tests := []struct {
		name, model string
		ins         []input
		names       []string
		wantRaw     bool
	}{
		{"identity typed", "identity_str", []input{{str([]int64{3, 2}, "a", "é", "", "q\"uote\\\n", "\xff\xfe", "|"), bytesContents("a", "é", "", "q\"uote\\\n", "\xff\xfe", "|")}}, []string{"x"}, false},
		{"identity raw", "identity_str", []input{{str([]int64{3, 2}, "a", "é", "", "q\"uote\\\n", "\xff\xfe", "|"), nil}}, []string{"x"}, true},
		{"string to float typed", "cast_str_f32", []input{{str([]int64{2, 3}, "1.5", "-2", "1e3", "0", "0.25", "7"), bytesContents("1.5", "-2", "1e3", "0", "0.25", "7")}}, []string{"x"}, false},
		{"string to float raw", "cast_str_f32", []input{{str([]int64{1, 3}, "1.5", "-2", "1e3"), nil}}, []string{"x"}, true},
		{"float to string typed", "cast_f32_str", []input{{f32([]int64{1, 3}, 1.5, -2, 0), &kservepb.InferTensorContents{Fp32Contents: []float32{1.5, -2, 0}}}}, []string{"x"}, false},
		{"float to string raw", "cast_f32_str", []input{{f32([]int64{2, 3}, 1.5, -2, 0, 4, 5, 6), nil}}, []string{"x"}, true},
		{"rank-0 output typed", "pick_str", []input{
			{str([]int64{3}, "zero", "one", "two"), bytesContents("zero", "one", "two")},
			{infer.Tensor{DType: infer.Int64, Shape: []int64{}, Data: []int64{2}}, &kservepb.InferTensorContents{Int64Contents: []int64{2}}},
		}, []string{"x", "i"}, false},
		{"rank-0 output raw", "pick_str", []input{
			{str([]int64{3}, "zero", "one", "two"), nil},
			{infer.Tensor{DType: infer.Int64, Shape: []int64{}, Data: []int64{1}}, nil},
		}, []string{"x", "i"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ins []infer.Tensor
			req := &kservepb.ModelInferRequest{Id: "s"}
			for i, in := range tt.ins {
				ins = append(ins, in.t)
				req.Inputs = append(req.Inputs, &inferInput{Name: tt.names[i], Datatype: wire.OIPDatatype(in.t.DType), Shape: in.t.Shape, Contents: in.contents})
				if in.contents == nil {
					req.RawInputContents = append(req.RawInputContents, wire.AppendRaw(nil, in.t))
				}
			}
			want, err := infertest.NewSession(t, model(tt.model)).Run(ins)
			if err != nil {
				t.Fatal(err)
			}
			resp, outs, raw := predictGRPC(t, tt.model, req)
			if raw != tt.wantRaw || len(outs) != 1 {
				t.Fatalf("got raw %v and %d outputs, want raw %v and 1 output: %v", raw, len(outs), tt.wantRaw, resp)
			}
			if c := resp.Outputs[0].Contents; want[0].DType == infer.String && !raw && (c == nil || len(c.BytesContents) != want[0].Len()) {
				t.Errorf("got contents %v, want the strings in bytes_contents", c)
			}
			if resp.Outputs[0].Datatype != wire.OIPDatatype(want[0].DType) || !slices.Equal(outs[0].Shape, want[0].Shape) || !reflect.DeepEqual(outs[0].Data, want[0].Data) {
				t.Errorf("got %s %v %q, want %s %v %q", resp.Outputs[0].Datatype, outs[0].Shape, outs[0].Data, wire.OIPDatatype(want[0].DType), want[0].Shape, want[0].Data)
			}
		})
	}
}

// TestGRPCCodecBytesErrors: BYTES that do not hold what the shape says,
// framed or typed, and a NUL byte ONNX Runtime cannot take, are
// InputErrors naming the input.
func TestGRPCCodecBytesErrors(t *testing.T) {
	requireORT(t)
	p := newPredictor(t, infer.Config{ModelPath: model("identity_str")})
	x := func(shape []int64, c *kservepb.InferTensorContents) *inferInput {
		return &inferInput{Name: "x", Datatype: "BYTES", Shape: shape, Contents: c}
	}
	rawReq := func(raw []byte) *kservepb.ModelInferRequest {
		return &kservepb.ModelInferRequest{Inputs: []*inferInput{x([]int64{1, 2}, nil)}, RawInputContents: [][]byte{raw}}
	}
	tests := []struct {
		name string
		req  *kservepb.ModelInferRequest
		want string
	}{
		{"typed count", &kservepb.ModelInferRequest{Inputs: []*inferInput{x([]int64{2, 2}, bytesContents("a", "b", "c"))}}, `input "x": contents.bytes_contents holds 3 elements, BYTES of shape [2 2] needs 4`},
		{"typed wrong field", &kservepb.ModelInferRequest{Inputs: []*inferInput{x([]int64{1, 2}, &kservepb.InferTensorContents{IntContents: []int32{1, 2}})}}, "contents.bytes_contents holds 0 elements"},
		{"typed NUL", &kservepb.ModelInferRequest{Inputs: []*inferInput{x([]int64{1, 2}, bytesContents("a", "b\x00c"))}}, "NUL byte"},
		{"raw length past the end", rawReq([]byte{1, 0, 0, 0, 'a', 5, 0, 0, 0, 'b'}), `input "x": raw BYTES element 1 of 2 has length 5, past the end of the data`},
		{"raw trailing bytes", rawReq([]byte{1, 0, 0, 0, 'a', 1, 0, 0, 0, 'b', 'c'}), `input "x": raw data has 1 bytes after the 2 BYTES elements of shape [1 2]`},
		{"raw too few elements", rawReq([]byte{4, 0, 0, 0, 'a', 'b', 'c', 'd'}), `input "x": raw data holds 1 BYTES elements, shape [1 2] needs 2`},
		{"raw NUL", rawReq(wire.AppendRaw(nil, str([]int64{1, 2}, "\x00", "b"))), "NUL byte"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, _ := proto.Marshal(tt.req)
			wantPredictInputError(t, p, wire.MediaTypeKServeGRPC, body, tt.want)
		})
	}
}
