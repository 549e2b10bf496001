package wire_test

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

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
			body, _ := proto.Marshal(req)
			p := newPredictor(t, infer.Config{ModelPath: model(tt.model)})
			out, err := p.Predict(context.Background(), wire.MediaTypeKServeGRPC, body)
			if err != nil {
				t.Fatal(err)
			}
			resp, outs, raw := grpcOutputs(t, out)
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
			_, err := p.Predict(context.Background(), wire.MediaTypeKServeGRPC, body)
			if !isInputError(err) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an InputError with %q", err, tt.want)
			}
		})
	}
}
