package httpdoor_test

import (
	"net/http"
	"strings"
	"testing"

	httpdoor "github.com/cluster-serving/cluster-serving/bridge/httpdoor"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
)

// TestOIPBytes runs BYTES (ONNX STRING) tensors end to end: the metadata
// names them, an OIP request of JSON strings goes through the mesh to a
// worker on the real ONNX Runtime and comes back as JSON strings, a Cast
// turns strings into FP32 and FP32 into strings, /predict carries strings
// too, and a number where a string is expected is a 400 naming the input.
func TestOIPBytes(t *testing.T) {
	infertest.RequireLibrary(t)
	e := startDoor(t, httpdoor.Config{},
		served{name: "identity_str", file: "identity_str"},
		served{name: "cast_str_f32", file: "cast_str_f32"},
		served{name: "cast_f32_str", file: "cast_f32_str"},
		served{name: "pick_str", file: "pick_str"})
	st, ans := call(t, "GET", e.url+"/v2/models/identity_str", "")
	if want := `"inputs":[{"name":"x","datatype":"BYTES","shape":[-1,2]}],"outputs":[{"name":"y","datatype":"BYTES","shape":[-1,2]}]`; st != 200 || !strings.Contains(string(ans), want) {
		t.Errorf("metadata: got %d %s, want 200 with %s", st, ans, want)
	}
	tests := []struct{ model, body, want string }{
		{"identity_str", `{"id":"s1","inputs":[{"name":"x","datatype":"BYTES","shape":[2,2],"data":[["héllo","wörld"],["","a\"b\\c|d"]]}]}`,
			`{"model_name":"identity_str","model_version":"1","id":"s1","outputs":[{"name":"y","datatype":"BYTES","shape":[2,2],"data":["héllo","wörld","","a\"b\\c|d"]}]}`},
		{"cast_str_f32", `{"inputs":[{"name":"x","datatype":"BYTES","shape":[1,3],"data":["1.5","-2","1e3"]}]}`,
			`{"model_name":"cast_str_f32","model_version":"1","outputs":[{"name":"y","datatype":"FP32","shape":[1,3],"data":[1.5,-2,1000]}]}`},
		{"cast_f32_str", `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,3],"data":[1.5,-2,0]}]}`,
			`{"model_name":"cast_f32_str","model_version":"1","outputs":[{"name":"y","datatype":"BYTES","shape":[1,3],"data":["1.5","-2","0"]}]}`},
		{"pick_str", `{"inputs":[{"name":"x","datatype":"BYTES","shape":[2],"data":["a","b"]},{"name":"i","datatype":"INT64","shape":[],"data":[0]}]}`,
			`{"model_name":"pick_str","model_version":"1","outputs":[{"name":"y","datatype":"BYTES","shape":[],"data":["a"]}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			st, ans := call(t, "POST", e.url+"/v2/models/"+tt.model+"/infer", tt.body)
			if st != http.StatusOK || string(ans) != tt.want {
				t.Errorf("got %d %s\nwant 200 %s", st, ans, tt.want)
			}
		})
	}
	t.Run("predict", func(t *testing.T) {
		st, ans := call(t, "POST", e.url+"/models/identity_str/versions/1/predict", `{"instances":[{"x":["a|b","c"]}]}`)
		if want := `{"predictions":["{\"value\":\"{\\\"data\\\":[\\\"a|b\\\",\\\"c\\\"],\\\"shape\\\":[2]}\"}"]}`; st != http.StatusOK || string(ans) != want {
			t.Errorf("got %d %s, want 200 %s", st, ans, want)
		}
	})
	t.Run("number for BYTES", func(t *testing.T) {
		st, ans := call(t, "POST", e.url+"/v2/models/identity_str/infer", `{"inputs":[{"name":"x","datatype":"BYTES","shape":[1,2],"data":["a",2]}]}`)
		if st != http.StatusBadRequest || !strings.Contains(string(ans), `input \"x\"`) || !strings.Contains(string(ans), "is not a string (BYTES elements are JSON strings)") {
			t.Errorf("got %d %s, want 400 naming input x", st, ans)
		}
	})
}

// TestPredictHintStrings: the example a malformed /predict gets for a
// string input holds JSON strings, which that input takes.
func TestPredictHintStrings(t *testing.T) {
	infertest.RequireLibrary(t)
	e := startDoor(t, httpdoor.Config{}, served{name: "identity_str", file: "identity_str"})
	st, ans := call(t, "POST", e.url+"/predict", `{"instances":`)
	if want := `A valid request looks like {\"instances\":[{\"x\":[\"s1\",\"s2\"]}]}`; st != http.StatusBadRequest || !strings.Contains(string(ans), want) {
		t.Errorf("got %d %s, want 400 with %s", st, ans, want)
	}
	st, ans = call(t, "POST", e.url+"/predict", `{"instances":[{"x":["s1","s2"]}]}`)
	if st != http.StatusOK {
		t.Errorf("the hint's example: got %d %s, want 200", st, ans)
	}
}
