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

// binHeader is the header of a binary answer with the outputs' raw sizes.
type binHeader struct {
	Outputs []struct {
		Name       string
		Datatype   string
		Shape      []int64
		Data       json.RawMessage
		Parameters struct {
			BinaryDataSize int `json:"binary_data_size"`
		}
	}
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
			p := newPredictor(t, infer.Config{ModelPath: model(tt.model)})
			out, err := p.Predict(context.Background(), wire.MediaTypeOIPBinary, binBody(header, raw))
			if err != nil {
				t.Fatal(err)
			}
			h, tensors, err := wire.SplitOIPBinary(out)
			if err != nil {
				t.Fatal(err)
			}
			var resp binHeader
			if err := json.Unmarshal(h, &resp); err != nil || len(resp.Outputs) != 1 {
				t.Fatalf("header %s: %v", h, err)
			}
			o := resp.Outputs[0]
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
