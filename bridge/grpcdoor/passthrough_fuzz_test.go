package grpcdoor

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// FuzzModelOf: modelOf reads the model of any request proto.Unmarshal
// reads, the same name and version, and never panics on other bytes.
func FuzzModelOf(f *testing.F) {
	for _, req := range []*kservepb.ModelInferRequest{
		{ModelName: "add", ModelVersion: "2", Id: "x", RawInputContents: [][]byte{{1, 2, 3}}},
		{ModelName: "m", Inputs: []*kservepb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1, 4}}},
			Parameters: map[string]*kservepb.InferParameter{"k": {ParameterChoice: &kservepb.InferParameter_Int64Param{Int64Param: 7}}}},
	} {
		b, _ := proto.Marshal(req)
		f.Add(b)
	}
	f.Add([]byte{0x0a, 0x01, 'a', 0x0a, 0x01, 'b'}) // the last name wins
	f.Fuzz(func(t *testing.T, b []byte) {
		name, version, err := modelOf(b)
		var req kservepb.ModelInferRequest
		if proto.Unmarshal(b, &req) != nil {
			return
		}
		if err != nil || name != req.ModelName || version != req.ModelVersion {
			t.Fatalf("got %q %q %v, want %q %q as proto.Unmarshal reads", name, version, err, req.ModelName, req.ModelVersion)
		}
	})
}
