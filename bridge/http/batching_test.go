package httpdoor_test

import (
	"testing"

	httpdoor "github.com/cluster-serving/cluster-serving/bridge/http"
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
)

// TestMetadataBatching: the metadata of a model summing over dim 0 (its
// output's dim 0 is fixed) says it does not batch and why; so does one
// whose config turns batching off.
func TestMetadataBatching(t *testing.T) {
	infertest.RequireLibrary(t)
	e := startDoor(t, httpdoor.Config{},
		served{name: "sum", file: "sum_batch"},
		served{name: "off", file: "add_f32", engineCfg: infer.Config{Batching: infer.BatchingOff}})
	tests := []struct{ path, want string }{
		{"/v2/models/sum", `{"name":"sum","versions":["1"],"platform":"onnxruntime_onnx","inputs":[{"name":"x","datatype":"FP32","shape":[-1,4]}],"outputs":[{"name":"y","datatype":"FP32","shape":[1,4]}],"parameters":{"batching":false,"batching_reason":"output \"y\" has fixed dim 0 = 1"}}`},
		{"/models/sum", `[{"name":"sum","version":"1","job":"sum","inputs":[{"name":"x","datatype":"FP32","shape":[-1,4]}],"outputs":[{"name":"y","datatype":"FP32","shape":[1,4]}],"batching":false,"batching_reason":"output \"y\" has fixed dim 0 = 1"}]`},
		{"/v2/models/off", `{"name":"off","versions":["1"],"platform":"onnxruntime_onnx","inputs":[{"name":"x","datatype":"FP32","shape":[-1,4]}],"outputs":[{"name":"y","datatype":"FP32","shape":[-1,4]}],"parameters":{"batching":false,"batching_reason":"config batching: off"}}`},
	}
	for _, tt := range tests {
		st, body := call(t, "GET", e.url+tt.path, "")
		if st != 200 || string(body) != tt.want {
			t.Errorf("GET %s: got %d %s, want 200 %s", tt.path, st, body, tt.want)
		}
	}
}
