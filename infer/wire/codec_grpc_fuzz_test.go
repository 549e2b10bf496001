package wire

import (
	"context"

	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// fuzzSpecs are the models the raw codecs' fuzz tests decode for: two
// batched inputs of different dtypes, the 16-bit and narrow types, and
// BYTES beside FP32.
var fuzzSpecs = []*Spec{
	{Info: infer.ModelInfo{DynamicBatch: true, Inputs: []infer.IO{
		{Name: "a", DType: infer.Float32, Shape: []int64{-1, 3}},
		{Name: "b", DType: infer.Int64, Shape: []int64{-1, 2}},
	}, Outputs: []infer.IO{{Name: "y", DType: infer.Float32, Shape: []int64{-1}}}}},
	{AlreadyBatched: true, Info: infer.ModelInfo{DynamicBatch: true, Inputs: []infer.IO{
		{Name: "h", DType: infer.Float16, Shape: []int64{-1, 2}},
		{Name: "i", DType: infer.Int8, Shape: []int64{-1}},
		{Name: "t", DType: infer.Bool, Shape: []int64{}},
	}}},
	{Info: infer.ModelInfo{DynamicBatch: true, Inputs: []infer.IO{
		{Name: "s", DType: infer.String, Shape: []int64{-1, 2}},
		{Name: "a", DType: infer.Float32, Shape: []int64{-1, 3}},
	}, Outputs: []infer.IO{{Name: "z", DType: infer.String, Shape: []int64{-1, 2}}}}},
}

// checkDecoded fails t unless err is an *InputError or req holds
// records of consistent tensors, one per model input.
func checkDecoded(t *testing.T, req *Request, err error, spec *Spec) {
	t.Helper()
	if err != nil {
		var ie *infer.InputError
		if !errors.As(err, &ie) {
			t.Fatalf("got %T %v, want an *InputError", err, err)
		}
		return
	}
	for _, r := range req.Records {
		if len(r) != len(spec.Info.Inputs) {
			t.Fatalf("got a record of %d tensors, want %d", len(r), len(spec.Info.Inputs))
		}
		for _, tensor := range r {
			if err := tensor.Check(); err != nil {
				t.Fatalf("got an inconsistent tensor: %v", err)
			}
		}
	}
}

// FuzzDecodeGRPC: any proto body gives records or an *InputError, never
// a panic.
func FuzzDecodeGRPC(f *testing.F) {
	type in = kservepb.ModelInferRequest_InferInputTensor
	for _, req := range []*kservepb.ModelInferRequest{
		{Inputs: []*in{{Name: "a", Datatype: "FP32", Shape: []int64{1, 3}}, {Name: "b", Datatype: "INT64", Shape: []int64{1, 2}}},
			RawInputContents: [][]byte{make([]byte, 12), make([]byte, 16)}},
		{Inputs: []*in{{Name: "a", Datatype: "FP32", Shape: []int64{2, 3}, Contents: &kservepb.InferTensorContents{Fp32Contents: []float32{1, 2, 3, 4, 5, 6}}},
			{Name: "b", Datatype: "INT64", Shape: []int64{2, 2}, Contents: &kservepb.InferTensorContents{Int64Contents: []int64{1, 2, 3, 4}}}},
			Outputs: []*kservepb.ModelInferRequest_InferRequestedOutputTensor{{Name: "y"}}},
		{Inputs: []*in{{Name: "h", Datatype: "FP16", Shape: []int64{1, 2}}, {Name: "i", Datatype: "INT8", Shape: []int64{1}}, {Name: "t", Datatype: "BOOL"}},
			RawInputContents: [][]byte{{0, 0x3c, 0, 0xc0}, {0x80}, {1}}},
		{Inputs: []*in{{Name: "i", Datatype: "INT8", Shape: []int64{2}, Contents: &kservepb.InferTensorContents{IntContents: []int32{-128, 300}}}}},
		{Inputs: []*in{{Name: "a", Datatype: "FP32", Shape: []int64{1 << 40, 1 << 40}}}, RawInputContents: [][]byte{{1}}},
		{Inputs: []*in{{Name: "s", Datatype: "BYTES", Shape: []int64{2, 2}, Contents: &kservepb.InferTensorContents{BytesContents: [][]byte{[]byte("a"), {}, []byte("é"), {0xff}}}},
			{Name: "a", Datatype: "FP32", Shape: []int64{2, 3}, Contents: &kservepb.InferTensorContents{Fp32Contents: []float32{1, 2, 3, 4, 5, 6}}}}},
		{Inputs: []*in{{Name: "s", Datatype: "BYTES", Shape: []int64{1, 2}}, {Name: "a", Datatype: "FP32", Shape: []int64{1, 3}}},
			RawInputContents: [][]byte{{1, 0, 0, 0, 'a', 0, 0, 0, 0}, make([]byte, 12)}},
		{Inputs: []*in{{Name: "s", Datatype: "BYTES", Shape: []int64{1, 2}}, {Name: "a", Datatype: "FP32", Shape: []int64{1, 3}}},
			RawInputContents: [][]byte{{0xff, 0xff, 0xff, 0x7f, 'a'}, make([]byte, 12)}},
		{Inputs: []*in{{Name: "s", Datatype: "BYTES", Shape: []int64{1 << 30, 1 << 30}}}, RawInputContents: [][]byte{{0, 0, 0, 0}}},
	} {
		b, _ := proto.Marshal(req)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, spec := range fuzzSpecs {
			req, err := grpcCodec{}.Decode(context.Background(), body, spec)
			checkDecoded(t, req, err, spec)
		}
	})
}

// FuzzDecodeOIPBinary: any framed body gives records or an *InputError,
// never a panic.
func FuzzDecodeOIPBinary(f *testing.F) {
	for _, seed := range []struct{ header, tail string }{
		{`{"inputs":[{"name":"a","datatype":"FP32","shape":[1,3],"parameters":{"binary_data_size":12}},{"name":"b","datatype":"INT64","shape":[1,2],"data":[1,2]}]}`, string(make([]byte, 12))},
		{`{"inputs":[{"name":"h","datatype":"FP16","shape":[1,2],"parameters":{"binary_data_size":4}},{"name":"i","datatype":"INT8","shape":[1],"parameters":{"binary_data_size":1}},{"name":"t","datatype":"BOOL","shape":[],"parameters":{"binary_data_size":1}}],"parameters":{"binary_data_output":true}}`, "\x00\x3c\x00\xc0\x80\x01"},
		{`{"inputs":[{"name":"a","datatype":"FP32","shape":[1,3],"parameters":{"binary_data_size":-5}}]}`, ""},
		{`{"inputs":[{"name":"a","datatype":"FP32","shape":[1,3],"parameters":{"binary_data_size":9223372036854775807}}]}`, "xx"},
		{`{"inputs":[{"name":"s","datatype":"BYTES","shape":[1,2],"parameters":{"binary_data_size":9}},{"name":"a","datatype":"FP32","shape":[1,3],"data":[1,2,3]}],"outputs":[{"name":"z","parameters":{"binary_data":true}}]}`, "\x01\x00\x00\x00a\x00\x00\x00\x00"},
		{`{"inputs":[{"name":"s","datatype":"BYTES","shape":[2,2],"parameters":{"binary_data_size":5}}]}`, "\xff\xff\xff\x7fa"},
		{`{"inputs":[{"name":"s","datatype":"BYTES","shape":[1,2],"data":["a","b"]},{"name":"a","datatype":"FP32","shape":[1,3],"parameters":{"binary_data_size":12}}]}`, string(make([]byte, 12))},
	} {
		f.Add(FrameOIPBinary(len(seed.header), []byte(seed.header+seed.tail)))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, spec := range fuzzSpecs {
			req, err := oipBinCodec{}.Decode(context.Background(), body, spec)
			checkDecoded(t, req, err, spec)
		}
	})
}
