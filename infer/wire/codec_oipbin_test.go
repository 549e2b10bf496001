package wire_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
)

// binBody frames a JSON header and the raw tensors after it.
func binBody(header string, tensors ...[]byte) []byte {
	body := []byte(header)
	for _, t := range tensors {
		body = append(body, t...)
	}
	return wire.FrameOIPBinary(len(header), body)
}

// TestOIPBinaryMatchesJSON: binary inputs with JSON outputs answer
// exactly what the JSON codec answers for the same tensors.
func TestOIPBinaryMatchesJSON(t *testing.T) {
	p := newPredictor(t, infer.Config{ModelPath: model("two_io")})
	jsonBody := `{"id":"q","inputs":[{"name":"a","datatype":"FP32","shape":[2,3],"data":[1,2,3,4,5,6]},{"name":"b","datatype":"FP32","shape":[2,3],"data":[1,1,1,2,2,2]}]}`
	want, err := p.Predict(context.Background(), wire.MediaTypeOIP, []byte(jsonBody))
	if err != nil {
		t.Fatal(err)
	}
	a := wire.AppendRaw(nil, f32([]int64{2, 3}, 1, 2, 3, 4, 5, 6))
	header := `{"id":"q","inputs":[{"name":"a","datatype":"FP32","shape":[2,3],"parameters":{"binary_data_size":24}},{"name":"b","datatype":"FP32","shape":[2,3],"data":[1,1,1,2,2,2]}]}`
	got, err := p.Predict(context.Background(), wire.MediaTypeOIPBinary, binBody(header, a))
	if err != nil {
		t.Fatal(err)
	}
	h, tensors, err := wire.SplitOIPBinary(got)
	if err != nil || tensors != nil || string(h) != string(want) {
		t.Errorf("got %s + %d raw bytes (%v), want %s", h, len(tensors), err, want)
	}
}

// TestOIPBinaryOutputs: binary outputs, one asked by name and all by
// binary_data_output, for FP16 (which JSON can only round) and FP32.
func TestOIPBinaryOutputs(t *testing.T) {
	requireORT(t)
	in := infer.Tensor{DType: infer.Float16, Shape: []int64{2, 4}, Data: []infer.F16{0x3c00, 0xc000, 0x7bff, 0, 1, 2, 3, 0x8000}}
	tests := []struct {
		name, model, header string
		wantJSON            bool // the output stays in the header
	}{
		{"by name", "identity_f16", `{"inputs":[{"name":"x","datatype":"FP16","shape":[2,4],"parameters":{"binary_data_size":16}}],"outputs":[{"name":"y","parameters":{"binary_data":true}}]}`, false},
		{"all", "identity_f16", `{"inputs":[{"name":"x","datatype":"FP16","shape":[2,4],"parameters":{"binary_data_size":16}}],"parameters":{"binary_data_output":true}}`, false},
		{"output says no", "identity_f16", `{"inputs":[{"name":"x","datatype":"FP16","shape":[2,4],"parameters":{"binary_data_size":16}}],"outputs":[{"name":"y","parameters":{"binary_data":false}}],"parameters":{"binary_data_output":true}}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, err := infertest.NewSession(t, model(tt.model)).Run([]infer.Tensor{in})
			if err != nil {
				t.Fatal(err)
			}
			h, o, tensors := predictBinary(t, tt.model, tt.header, wire.AppendRaw(nil, in))
			if tt.wantJSON {
				if tensors != nil || o.Data == nil {
					t.Fatalf("got %s + %d raw bytes, want y in JSON", h, len(tensors))
				}
				return
			}
			if o.Data != nil || o.Parameters.BinaryDataSize != 16 || len(tensors) != 16 {
				t.Fatalf("got %s + %d raw bytes, want y with binary_data_size 16 and no data", h, len(tensors))
			}
			got, err := wire.DecodeRaw(tensors, infer.Float16, o.Shape, o.Name)
			if err != nil || !reflect.DeepEqual(got.Data, want[0].Data) || o.Datatype != "FP16" {
				t.Errorf("got %s %v (%v), want FP16 %v", o.Datatype, got.Data, err, want[0].Data)
			}
		})
	}
}

func TestOIPBinaryErrors(t *testing.T) {
	requireORT(t)
	raw16 := make([]byte, 16)
	tests := []struct {
		name string
		body []byte
		want string
	}{
		{"no frame", []byte{1, 2}, "has no header length"},
		{"header past body", wire.FrameOIPBinary(100, []byte(`{}`)), "Inference-Header-Content-Length is 100 but the body has only 2 bytes"},
		{"malformed header", binBody(`{"inputs":`, raw16), "malformed OIP request header"},
		{"size past body", binBody(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"parameters":{"binary_data_size":20}}]}`, raw16), "binary_data_size 20 runs past the body: only 16 bytes"},
		{"bytes left over", binBody(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"parameters":{"binary_data_size":16}}]}`, raw16, []byte{1}), "17 bytes of binary data after the JSON header, the inputs' binary_data_size add up to 16"},
		{"size not shape", binBody(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"parameters":{"binary_data_size":12}}]}`, raw16[:12]), "raw data has 12 bytes, FP32 of shape [1 4] needs 16"},
		{"negative size", binBody(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"parameters":{"binary_data_size":-1}}]}`), "binary_data_size -1 is negative"},
		{"size not int", binBody(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"parameters":{"binary_data_size":"16"}}]}`, raw16), "malformed OIP request header"},
		{"data and size", binBody(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4],"parameters":{"binary_data_size":16}}]}`, raw16), "has both"},
		{"neither", binBody(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4]}]}`), `"data" or parameters.binary_data_size is required`},
		{"bytes", binBody(`{"inputs":[{"name":"x","datatype":"BYTES","shape":[1,4],"parameters":{"binary_data_size":16}}]}`, raw16), `datatype "BYTES" does not match the model's FP32`},
		{"unknown output", binBody(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"parameters":{"binary_data_size":16}}],"outputs":[{"name":"z","parameters":{"binary_data":true}}]}`, raw16), `unknown output "z"`},
	}
	p := newPredictor(t, infer.Config{ModelPath: model("add_f32")})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := p.Predict(context.Background(), wire.MediaTypeOIPBinary, tt.body)
			if !isInputError(err) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an InputError with %q", err, tt.want)
			}
		})
	}
}

// binOutput is one output in the header of a binary answer, with its
// raw size.
type binOutput struct {
	Name       string
	Datatype   string
	Shape      []int64
	Data       json.RawMessage
	Parameters struct {
		BinaryDataSize int `json:"binary_data_size"`
	}
}

// predictBinary sends header and raw as an OIP binary request to a
// predictor of the committed model modelName and returns the answer's
// JSON header, its one output and the raw bytes after the header.
func predictBinary(t *testing.T, modelName, header string, raw []byte) ([]byte, binOutput, []byte) {
	t.Helper()
	p := newPredictor(t, infer.Config{ModelPath: model(modelName)})
	out, err := p.Predict(context.Background(), wire.MediaTypeOIPBinary, binBody(header, raw))
	if err != nil {
		t.Fatal(err)
	}
	h, tensors, err := wire.SplitOIPBinary(out)
	if err != nil {
		t.Fatal(err)
	}
	var resp struct{ Outputs []binOutput }
	if err := json.Unmarshal(h, &resp); err != nil || len(resp.Outputs) != 1 {
		t.Fatalf("header %s: %v", h, err)
	}
	return h, resp.Outputs[0], tensors
}

// TestOIPBinaryBytes: a BYTES input's binary_data_size is its framed
// size (every element's 4-byte length and bytes), and a BYTES output
// asked for in binary comes back framed the same way.
func TestOIPBinaryBytes(t *testing.T) {
	requireORT(t)
	tests := []struct {
		name, model string
		in          infer.Tensor
		outDType    string
	}{
		{"identity", "identity_str", str([]int64{2, 2}, "a", "", "é\xff", strings.Repeat("z", 300)), "BYTES"},
		{"string to float", "cast_str_f32", str([]int64{1, 3}, "1.5", "-2", "1e3"), "FP32"},
		{"float to string", "cast_f32_str", f32([]int64{2, 3}, 1.5, -2, 0, 4, 5, 6), "BYTES"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, err := infertest.NewSession(t, model(tt.model)).Run([]infer.Tensor{tt.in})
			if err != nil {
				t.Fatal(err)
			}
			raw := wire.AppendRaw(nil, tt.in)
			header := fmt.Sprintf(`{"inputs":[{"name":"x","datatype":%q,"shape":%s,"parameters":{"binary_data_size":%d}}],"parameters":{"binary_data_output":true}}`,
				wire.OIPDatatype(tt.in.DType), jsonOf(t, tt.in.Shape), len(raw))
			h, o, tensors := predictBinary(t, tt.model, header, raw)
			if o.Data != nil || o.Datatype != tt.outDType || o.Parameters.BinaryDataSize != len(tensors) {
				t.Fatalf("got %s + %d raw bytes, want %s with binary_data_size %d and no data", h, len(tensors), tt.outDType, len(tensors))
			}
			dt, _ := wire.OIPDType(o.Datatype)
			got, err := wire.DecodeRaw(tensors, dt, o.Shape, o.Name)
			if err != nil || !reflect.DeepEqual(got.Shape, want[0].Shape) || !reflect.DeepEqual(got.Data, want[0].Data) {
				t.Errorf("got %v %q (%v), want %v %q", got.Shape, got.Data, err, want[0].Shape, want[0].Data)
			}
		})
	}
}

func jsonOf(tb testing.TB, v any) string {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

func TestOIPBinaryBytesErrors(t *testing.T) {
	requireORT(t)
	two := wire.AppendRaw(nil, str([]int64{1, 2}, "ab", "c"))
	nul := wire.AppendRaw(nil, str([]int64{1, 2}, "a\x00", "b"))
	header := func(size int) string {
		return fmt.Sprintf(`{"inputs":[{"name":"x","datatype":"BYTES","shape":[1,2],"parameters":{"binary_data_size":%d}}]}`, size)
	}
	tests := []struct {
		name string
		body []byte
		want string
	}{
		{"size cuts an element", binBody(header(len(two)-1), two[:len(two)-1]), `input "x": raw BYTES element 1 of 2 has length 1, past the end of the data: only 0 bytes are left`},
		{"element past the size", binBody(header(8), two[:8]), `input "x": raw BYTES element 1 of 2: its 4-byte length is cut short at byte 6 of 8`},
		{"extra element", binBody(header(len(two)+4), two, []byte{0, 0, 0, 0}), `input "x": raw data has 4 bytes after the 2 BYTES elements of shape [1 2]`},
		{"too few elements", binBody(header(6), two[:6]), `input "x": raw data has 6 bytes, too few for the 2 BYTES elements`},
		{"NUL", binBody(header(len(nul)), nul), "NUL byte"},
	}
	p := newPredictor(t, infer.Config{ModelPath: model("identity_str")})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := p.Predict(context.Background(), wire.MediaTypeOIPBinary, tt.body)
			if !isInputError(err) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an InputError with %q", err, tt.want)
			}
		})
	}
}
