package grpcdoor_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	grpcdoor "github.com/cluster-serving/cluster-serving/bridge/grpcdoor"
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// stringsOf is a string output's data, from bytes_contents or framed raw.
func stringsOf(tb testing.TB, resp *kservepb.ModelInferResponse, i int) infer.Tensor {
	tb.Helper()
	o := resp.Outputs[i]
	if len(resp.RawOutputContents) > 0 {
		t, err := wire.DecodeRaw(resp.RawOutputContents[i], infer.String, o.Shape, o.Name)
		if err != nil {
			tb.Fatal(err)
		}
		return t
	}
	var v []string
	for _, b := range o.Contents.GetBytesContents() {
		v = append(v, string(b))
	}
	return infer.Tensor{DType: infer.String, Shape: o.Shape, Data: v}
}

// TestModelInferStrings: BYTES over the door and the real mesh, in
// bytes_contents and framed raw, both ways; a string output comes back
// the way the request came.
func TestModelInferStrings(t *testing.T) {
	addr := startDoor(t, grpcdoor.Config{}, served{name: "id", file: "identity_str"}, served{name: "tostr", file: "cast_f32_str"}, served{name: "tof", file: "cast_str_f32"})
	c, ctx := inferClient(t, addr), callCtx(t)
	words := []string{"a", "é", "", "tab\there", "\xff\xfe", strings.Repeat("long ", 100)}
	tests := []struct {
		name, model, file string
		in                infer.Tensor
		raw               bool
	}{
		{"identity typed", "id", "identity_str", infer.Tensor{DType: infer.String, Shape: []int64{3, 2}, Data: words}, false},
		{"identity raw", "id", "identity_str", infer.Tensor{DType: infer.String, Shape: []int64{3, 2}, Data: words}, true},
		{"float to string typed", "tostr", "cast_f32_str", infer.Tensor{DType: infer.Float32, Shape: []int64{2, 3}, Data: []float32{1.5, -2, 0, 4, 5, 6}}, false},
		{"float to string raw", "tostr", "cast_f32_str", infer.Tensor{DType: infer.Float32, Shape: []int64{1, 3}, Data: []float32{1.5, -2, 0}}, true},
		{"string to float typed", "tof", "cast_str_f32", infer.Tensor{DType: infer.String, Shape: []int64{1, 3}, Data: []string{"1.5", "-2", "1e3"}}, false},
		{"string to float raw", "tof", "cast_str_f32", infer.Tensor{DType: infer.String, Shape: []int64{2, 3}, Data: []string{"1.5", "-2", "1e3", "0", "7", "0.25"}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, err := infertest.NewSession(t, infertest.Model(tt.file)).Run([]infer.Tensor{tt.in})
			if err != nil {
				t.Fatal(err)
			}
			in := &inferInput{Name: "x", Datatype: wire.OIPDatatype(tt.in.DType), Shape: tt.in.Shape}
			req := &kservepb.ModelInferRequest{ModelName: tt.model, Inputs: []*inferInput{in}}
			if tt.raw {
				req.RawInputContents = [][]byte{wire.AppendRaw(nil, tt.in)}
			} else if v, ok := tt.in.Data.([]string); ok {
				in.Contents = &kservepb.InferTensorContents{}
				for _, s := range v {
					in.Contents.BytesContents = append(in.Contents.BytesContents, []byte(s))
				}
			} else {
				in.Contents = &kservepb.InferTensorContents{Fp32Contents: tt.in.Data.([]float32)}
			}
			resp, err := c.ModelInfer(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if raw := len(resp.RawOutputContents) > 0; raw != tt.raw || len(resp.Outputs) != 1 {
				t.Fatalf("got raw %v, %d outputs; want raw %v as the request, 1 output", raw, len(resp.Outputs), tt.raw)
			}
			var got infer.Tensor
			if want[0].DType == infer.String {
				got = stringsOf(t, resp, 0)
			} else {
				got = outputs(t, resp)[0]
			}
			if resp.Outputs[0].Datatype != wire.OIPDatatype(want[0].DType) || !slices.Equal(got.Shape, want[0].Shape) || !reflect.DeepEqual(got.Data, want[0].Data) {
				t.Errorf("got %s %v %q, want %s %v %q", resp.Outputs[0].Datatype, got.Shape, got.Data, wire.OIPDatatype(want[0].DType), want[0].Shape, want[0].Data)
			}
		})
	}
}

// TestModelInferStringErrors: bad BYTES framing and a NUL byte are
// InvalidArgument naming the input, never Internal.
func TestModelInferStringErrors(t *testing.T) {
	addr := startDoor(t, grpcdoor.Config{}, served{name: "id", file: "identity_str"})
	c, ctx := inferClient(t, addr), callCtx(t)
	raw := func(b []byte) *kservepb.ModelInferRequest {
		return &kservepb.ModelInferRequest{ModelName: "id", Inputs: []*inferInput{{Name: "x", Datatype: "BYTES", Shape: []int64{1, 2}}}, RawInputContents: [][]byte{b}}
	}
	typed := func(v ...string) *kservepb.ModelInferRequest {
		c := &kservepb.InferTensorContents{}
		for _, s := range v {
			c.BytesContents = append(c.BytesContents, []byte(s))
		}
		return &kservepb.ModelInferRequest{ModelName: "id", Inputs: []*inferInput{{Name: "x", Datatype: "BYTES", Shape: []int64{1, 2}, Contents: c}}}
	}
	tests := []struct {
		name string
		req  *kservepb.ModelInferRequest
		want string
	}{
		{"length past the end", raw([]byte{1, 0, 0, 0, 'a', 9, 0, 0, 0, 'b'}), `input "x": raw BYTES element 1 of 2 has length 9, past the end of the data`},
		{"trailing bytes", raw([]byte{1, 0, 0, 0, 'a', 1, 0, 0, 0, 'b', 0}), `input "x": raw data has 1 bytes after the 2 BYTES elements`},
		{"too few elements", raw([]byte{4, 0, 0, 0, 'a', 'b', 'c', 'd'}), `input "x": raw data holds 1 BYTES elements, shape [1 2] needs 2`},
		{"typed count", typed("a"), `input "x": contents.bytes_contents holds 1 elements, BYTES of shape [1 2] needs 2`},
		{"NUL raw", raw([]byte{2, 0, 0, 0, 'a', 0, 1, 0, 0, 0, 'b'}), `input "x": string element 0 holds a NUL byte`},
		{"NUL typed", typed("a", "\x00"), `input "x": string element 1 holds a NUL byte`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.ModelInfer(ctx, tt.req)
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tt.want) {
				t.Errorf("got %v, want InvalidArgument with %q", err, tt.want)
			}
		})
	}
}
