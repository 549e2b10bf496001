package wire

import (
	"context"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
)

// FuzzDecodeOIP: any body gives records or an *InputError, never a panic.
func FuzzDecodeOIP(f *testing.F) {
	info := infer.ModelInfo{Inputs: []infer.IO{
		{Name: "a", DType: infer.Float32, Shape: []int64{-1, 3}},
		{Name: "b", DType: infer.Int64, Shape: []int64{-1, 2, -1}},
	}}
	for _, seed := range []string{
		`{"inputs":[{"name":"a","datatype":"FP32","shape":[1,3],"data":[1,2,3]},{"name":"b","datatype":"INT64","shape":[1,2,1],"data":[[[4],[5]]]}]}`,
		`{"id":"x","inputs":[{"name":"a","datatype":"FP32","shape":[2,3],"data":[1,2,3,4,5,6]}],"outputs":[{"name":"y"}]}`,
		`{"inputs":[{"name":"a","datatype":"BOOL","shape":[1,3],"data":[true,false,true]}]}`,
		`{"inputs":[]}`, `{`, `[]`, `{"inputs":[{"shape":[-1,99999999999]}]}`,
		// scalars, zero-size dims, lengths that do not match the shape
		`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]},{"name":"lo","datatype":"FP32","shape":[],"data":0},{"name":"hi","datatype":"FP32","shape":[],"data":[1]}]}`,
		`{"inputs":[{"name":"lo","datatype":"FP32","shape":[],"data":[]},{"name":"hi","datatype":"FP32","shape":[],"data":[1,2]}]}`,
		`{"inputs":[{"name":"a","datatype":"FP32","shape":[0,3],"data":[]},{"name":"b","datatype":"INT64","shape":[0,2,0],"data":[]}]}`,
		`{"inputs":[{"name":"a","datatype":"FP32","shape":[2,3],"data":[1,2]},{"name":"b","datatype":"INT64","shape":[2,2,1],"data":[[[1],[2]],[[3],[4],[5]]]}]}`,
		`{"inputs":[{"name":"a","datatype":"FP32","shape":[1,3],"data":[1,2,3]},{"name":"b","datatype":"INT64","shape":[3,2,1],"data":[1,2,3,4,5,6]}]}`,
		`{"inputs":[{"name":"a","datatype":"FP32","shape":[500000000,3],"data":[1]}]}`,
		// 16-bit floats and the wider unsigned and narrower signed types
		`{"inputs":[{"name":"h","datatype":"FP16","shape":[1,2],"data":[65504,null]},{"name":"u","datatype":"UINT64","shape":[1],"data":[18446744073709551615]},{"name":"i","datatype":"INT8","shape":[1],"data":[-128]}]}`,
		`{"inputs":[{"name":"h","datatype":"FP16","shape":[1,2],"data":[65520,1e-9]},{"name":"u","datatype":"UINT64","shape":[1],"data":[-1]},{"name":"i","datatype":"INT8","shape":[1],"data":[128]}]}`,
		// BYTES: strings nested, escaped, mixed with numbers and nulls
		`{"inputs":[{"name":"s","datatype":"BYTES","shape":[2,2],"data":[["a","\u00e9"],["","q\"\\"]]},{"name":"k","datatype":"BYTES","shape":[],"data":"one"}]}`,
		`{"inputs":[{"name":"s","datatype":"BYTES","shape":[1,2],"data":["a",1]},{"name":"k","datatype":"BYTES","shape":[],"data":[null]}]}`,
	} {
		f.Add([]byte(seed))
	}
	specs := []*Spec{
		{Info: info},
		{Info: info, AlreadyBatched: true},
		{Info: infer.ModelInfo{DynamicBatch: true, Inputs: []infer.IO{
			{Name: "x", DType: infer.Float32, Shape: []int64{-1, 4}},
			{Name: "lo", DType: infer.Float32, Shape: []int64{}},
			{Name: "hi", DType: infer.Float32, Shape: []int64{}},
		}}},
		{Info: infer.ModelInfo{DynamicBatch: true, Inputs: []infer.IO{
			{Name: "h", DType: infer.Float16, Shape: []int64{-1, 2}},
			{Name: "u", DType: infer.Uint64, Shape: []int64{-1}},
			{Name: "i", DType: infer.Int8, Shape: []int64{-1}},
		}}},
		{Info: infer.ModelInfo{DynamicBatch: true, Inputs: []infer.IO{
			{Name: "s", DType: infer.String, Shape: []int64{-1, 2}},
			{Name: "k", DType: infer.String, Shape: []int64{}},
		}}},
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, spec := range specs {
			req, err := oipCodec{}.Decode(context.Background(), body, spec)
			checkDecoded(t, req, err, spec)
		}
	})
}
