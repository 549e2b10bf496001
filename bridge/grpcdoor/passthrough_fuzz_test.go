package grpcdoor

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// FuzzModelOf: modelOf reads the model of any request proto.Unmarshal
// reads, the same name and version and whether a tensor names shared
// memory, and never panics on other bytes.
func FuzzModelOf(f *testing.F) {
	for _, req := range []*kservepb.ModelInferRequest{
		{ModelName: "add", ModelVersion: "2", Id: "x", RawInputContents: [][]byte{{1, 2, 3}}},
		{ModelName: "m", Inputs: []*kservepb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1, 4}}},
			Parameters: map[string]*kservepb.InferParameter{"k": {ParameterChoice: &kservepb.InferParameter_Int64Param{Int64Param: 7}}}},
		{ModelName: "m", Inputs: []*kservepb.ModelInferRequest_InferInputTensor{{Name: "x", Parameters: map[string]*kservepb.InferParameter{
			"shared_memory_region": {ParameterChoice: &kservepb.InferParameter_StringParam{StringParam: "r"}}}}}},
		{ModelName: "m", Outputs: []*kservepb.ModelInferRequest_InferRequestedOutputTensor{{Name: "y", Parameters: map[string]*kservepb.InferParameter{
			"shared_memory_byte_size": {ParameterChoice: &kservepb.InferParameter_Int64Param{Int64Param: 8}}, "binary_data": {}}}}},
	} {
		b, _ := proto.Marshal(req)
		f.Add(b)
	}
	f.Add([]byte{0x0a, 0x01, 'a', 0x0a, 0x01, 'b'}) // the last name wins
	f.Fuzz(func(t *testing.T, b []byte) {
		name, version, shm, err := modelOf(b)
		var req kservepb.ModelInferRequest
		if proto.Unmarshal(b, &req) != nil {
			return
		}
		if err != nil || name != req.ModelName || version != req.ModelVersion {
			t.Fatalf("got %q %q %v, want %q %q as proto.Unmarshal reads", name, version, err, req.ModelName, req.ModelVersion)
		}
		if want := usesSHM(&req); shm != want {
			t.Fatalf("shared memory: got %v, want %v as proto.Unmarshal reads", shm, want)
		}
	})
}

// usesSHM reports whether a tensor of req has a shared memory parameter.
func usesSHM(req *kservepb.ModelInferRequest) bool {
	var maps []map[string]*kservepb.InferParameter
	for _, in := range req.Inputs {
		maps = append(maps, in.Parameters)
	}
	for _, o := range req.Outputs {
		maps = append(maps, o.Parameters)
	}
	for _, m := range maps {
		for k := range m {
			if door.IsSHMParam(k) {
				return true
			}
		}
	}
	return false
}
