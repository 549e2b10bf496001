package httpdoor_test

import (
	"encoding/json"
	"strconv"
	"testing"

	httpdoor "github.com/cluster-serving/cluster-serving/bridge/httpdoor"
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
)

// TestNaNOutputs: over the real mesh, NaN and ±Inf outputs are null in
// JSON (which has no literal for them, as KServe's server writes them),
// and come back bit for bit, NaN payloads and signs included, as binary
// outputs (binary_data_output).
func TestNaNOutputs(t *testing.T) {
	infertest.RequireLibrary(t)
	e := startDoor(t, httpdoor.Config{}, served{name: "f16", file: "identity_f16"}, served{name: "add", file: "add_f32"})
	in := []infer.F16{0x7e55, 0x7c00, 0xfc00, 0x3c00, 0xfe01, 0x0001, 0x7bff, 0x8000}
	raw := wire.AppendRaw(nil, infer.Tensor{DType: infer.Float16, Shape: []int64{2, 4}, Data: in})
	for _, binary := range []bool{false, true} {
		header := `{"inputs":[{"name":"x","datatype":"FP16","shape":[2,4],"parameters":{"binary_data_size":16}}],"parameters":{"binary_data_output":` + strconv.FormatBool(binary) + `}}`
		resp, got := postBinary(t, e.url+"/v2/models/f16/infer", len(header), append([]byte(header), raw...))
		if resp.StatusCode != 200 {
			t.Fatalf("binary %v: got %d %s", binary, resp.StatusCode, got)
		}
		if binary {
			hl, err := strconv.Atoi(resp.Header.Get(wire.HeaderInferenceContentLength))
			if err != nil || hl > len(got) || string(got[hl:]) != string(raw) {
				t.Errorf("binary output: got %q after the header, want the input's bits %q", got, raw)
			}
			continue
		}
		var ans struct{ Outputs []struct{ Data []*float64 } }
		if err := json.Unmarshal(got, &ans); err != nil || len(ans.Outputs) != 1 || len(ans.Outputs[0].Data) != len(in) {
			t.Fatalf("JSON output: got %s (%v)", got, err)
		}
		for i, v := range ans.Outputs[0].Data {
			special := in[i]&0x7c00 == 0x7c00
			if (v == nil) != special || (v != nil && float32(*v) != in[i].Float32()) {
				t.Errorf("JSON output %d: got %s, want null for NaN and ±Inf, else %v", i, got, in[i].Float32())
			}
		}
	}
	// A JSON null input reads as NaN, and x*2+1 of NaN answers null.
	st, got := call(t, "POST", e.url+"/v2/models/add/infer", `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[null,1,2,3]}]}`)
	var ans struct{ Outputs []struct{ Data []*float64 } }
	if st != 200 || json.Unmarshal(got, &ans) != nil || len(ans.Outputs) != 1 || len(ans.Outputs[0].Data) != 4 ||
		ans.Outputs[0].Data[0] != nil || ans.Outputs[0].Data[1] == nil || *ans.Outputs[0].Data[1] != 3 {
		t.Errorf("null input: got %d %s, want data [null,3,5,7]", st, got)
	}
}
