package httpdoor_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	httpdoor "github.com/cluster-serving/cluster-serving/bridge/http"
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
)

// TestBinaryExtensionStrings: over the real mesh, BYTES travel framed
// (4-byte little-endian length, then the bytes, per element) both ways:
// the answer's binary output is what the session answers, and JSON
// outputs match the JSON request's.
func TestBinaryExtensionStrings(t *testing.T) {
	infertest.RequireLibrary(t)
	e := startDoor(t, httpdoor.Config{}, served{name: "id", file: "identity_str"}, served{name: "tof", file: "cast_str_f32"})
	in := infer.Tensor{DType: infer.String, Shape: []int64{2, 2}, Data: []string{"a", "", "é", strings.Repeat("z", 500)}}
	raw := wire.AppendRaw(nil, in)
	want, err := infertest.NewSession(t, modelPath("identity_str")).Run([]infer.Tensor{in})
	if err != nil {
		t.Fatal(err)
	}

	header := fmt.Sprintf(`{"inputs":[{"name":"x","datatype":"BYTES","shape":[2,2],"parameters":{"binary_data_size":%d}}],"outputs":[{"name":"y","parameters":{"binary_data":true}}]}`, len(raw))
	resp, got := postBinary(t, e.url+"/v2/models/id/infer", len(header), append([]byte(header), raw...))
	hl, err := strconv.Atoi(resp.Header.Get(wire.HeaderInferenceContentLength))
	if resp.StatusCode != 200 || err != nil || hl > len(got) {
		t.Fatalf("got %d %v %q", resp.StatusCode, resp.Header, got)
	}
	var head struct {
		Outputs []struct {
			Name, Datatype string
			Shape          []int64
			Data           json.RawMessage
			Parameters     map[string]int
		}
	}
	if err := json.Unmarshal(got[:hl], &head); err != nil || len(head.Outputs) != 1 {
		t.Fatalf("header %s: %v", got[:hl], err)
	}
	o := head.Outputs[0]
	if o.Datatype != "BYTES" || o.Data != nil || o.Parameters["binary_data_size"] != len(got)-hl {
		t.Fatalf("got header %s with %d bytes after it, want y BYTES with binary_data_size of them all", got[:hl], len(got)-hl)
	}
	y, err := wire.DecodeRaw(got[hl:], infer.String, o.Shape, o.Name)
	if err != nil || !reflect.DeepEqual(y.Shape, want[0].Shape) || !reflect.DeepEqual(y.Data, want[0].Data) {
		t.Errorf("got %v %q (%v), want %v %q", y.Shape, y.Data, err, want[0].Shape, want[0].Data)
	}

	// Binary BYTES in, JSON FP32 out: the same answer as all-JSON.
	jsonBody := `{"id":"q","inputs":[{"name":"x","datatype":"BYTES","shape":[1,3],"data":["1.5","-2","1e3"]}]}`
	st, wantJSON := call(t, "POST", e.url+"/v2/models/tof/infer", jsonBody)
	if st != 200 {
		t.Fatalf("JSON: got %d %s", st, wantJSON)
	}
	s := wire.AppendRaw(nil, infer.Tensor{DType: infer.String, Shape: []int64{1, 3}, Data: []string{"1.5", "-2", "1e3"}})
	header = fmt.Sprintf(`{"id":"q","inputs":[{"name":"x","datatype":"BYTES","shape":[1,3],"parameters":{"binary_data_size":%d}}]}`, len(s))
	resp, got = postBinary(t, e.url+"/v2/models/tof/infer", len(header), append([]byte(header), s...))
	if resp.StatusCode != 200 || string(got) != string(wantJSON) {
		t.Errorf("binary BYTES in: got %d %s, want 200 %s", resp.StatusCode, got, wantJSON)
	}
}

// TestBinaryExtensionStringErrors: framing that does not hold the shape's
// elements, and a NUL byte, are 400 naming the input.
func TestBinaryExtensionStringErrors(t *testing.T) {
	infertest.RequireLibrary(t)
	e := startDoor(t, httpdoor.Config{}, served{name: "id", file: "identity_str"})
	post := func(raw []byte) (int, string) {
		header := fmt.Sprintf(`{"inputs":[{"name":"x","datatype":"BYTES","shape":[1,2],"parameters":{"binary_data_size":%d}}]}`, len(raw))
		resp, b := postBinary(t, e.url+"/v2/models/id/infer", len(header), append([]byte(header), raw...))
		return resp.StatusCode, string(b)
	}
	tests := []struct {
		name string
		raw  []byte
		want string
	}{
		{"length past the end", []byte{1, 0, 0, 0, 'a', 9, 0, 0, 0, 'b'}, `input \"x\": raw BYTES element 1 of 2 has length 9, past the end of the data`},
		{"trailing bytes", []byte{1, 0, 0, 0, 'a', 1, 0, 0, 0, 'b', 0}, `input \"x\": raw data has 1 bytes after the 2 BYTES elements`},
		{"too few elements", []byte{4, 0, 0, 0, 'a', 'b', 'c', 'd'}, `input \"x\": raw data holds 1 BYTES elements, shape [1 2] needs 2`},
		{"NUL", []byte{2, 0, 0, 0, 'a', 0, 1, 0, 0, 0, 'b'}, `input \"x\": string element 0 holds a NUL byte`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if st, b := post(tt.raw); st != 400 || !strings.Contains(b, tt.want) {
				t.Errorf("got %d %s, want 400 with %q", st, b, tt.want)
			}
		})
	}
}
