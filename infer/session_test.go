package infer_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
)

// dtypeCase is a committed model of one dtype, an input batch and the
// output the model's formula gives.
type dtypeCase struct {
	model string
	in    infer.Tensor
	want  infer.Tensor
}

func dtypeCases() []dtypeCase {
	s := []int64{2, 4}
	return []dtypeCase{
		{"add_f32", infer.Tensor{DType: infer.Float32, Shape: s, Data: []float32{0, 1, 2, 3, -1, 0.5, 10, 100}},
			infer.Tensor{DType: infer.Float32, Shape: s, Data: []float32{1, 3, 5, 7, -1, 2, 21, 201}}},
		{"add_f64", infer.Tensor{DType: infer.Float64, Shape: s, Data: []float64{0, 1, 2, 3, -1, 0.5, 10, 1e300}},
			infer.Tensor{DType: infer.Float64, Shape: s, Data: []float64{1, 3, 5, 7, -1, 2, 21, 2e300}}},
		{"add_i32", infer.Tensor{DType: infer.Int32, Shape: s, Data: []int32{0, 1, 2, 3, -1, -5, 10, 1 << 20}},
			infer.Tensor{DType: infer.Int32, Shape: s, Data: []int32{1, 3, 5, 7, -1, -9, 21, 1<<21 + 1}}},
		{"add_i64", infer.Tensor{DType: infer.Int64, Shape: s, Data: []int64{0, 1, 2, 3, -1, -5, 10, 1 << 40}},
			infer.Tensor{DType: infer.Int64, Shape: s, Data: []int64{1, 3, 5, 7, -1, -9, 21, 1<<41 + 1}}},
		{"identity_u8", infer.Tensor{DType: infer.Uint8, Shape: s, Data: []uint8{0, 1, 2, 3, 4, 128, 254, 255}},
			infer.Tensor{DType: infer.Uint8, Shape: s, Data: []uint8{0, 1, 2, 3, 4, 128, 254, 255}}},
		{"not_bool", infer.Tensor{DType: infer.Bool, Shape: s, Data: []bool{true, false, true, true, false, false, true, false}},
			infer.Tensor{DType: infer.Bool, Shape: s, Data: []bool{false, true, false, false, true, true, false, true}}},
	}
}

// newDTypeCases are the element types beyond the first six: identities,
// and Casts whose float16 side is what F16From and Float32 compute.
func newDTypeCases() []dtypeCase {
	s := []int64{2, 4}
	id := func(model string, dt infer.DType, data any) dtypeCase {
		t := infer.Tensor{DType: dt, Shape: s, Data: data}
		return dtypeCase{model, t, t}
	}
	f32 := []float32{1, 0.1, 65504, 65520, 1e-8, -2.5, 1.0 / 3, 0x1p-24}
	f16 := make([]infer.F16, len(f32))
	for i, v := range f32 {
		f16[i] = infer.F16From(v)
	}
	back := make([]float32, len(f16))
	for i, v := range f16 {
		back[i] = v.Float32()
	}
	return []dtypeCase{
		id("identity_i8", infer.Int8, []int8{-128, -1, 0, 1, 2, 3, 100, 127}),
		id("identity_i16", infer.Int16, []int16{-32768, -1, 0, 1, 2, 3, 1000, 32767}),
		id("identity_u16", infer.Uint16, []uint16{0, 1, 2, 3, 4, 1000, 65534, 65535}),
		id("identity_u32", infer.Uint32, []uint32{0, 1, 2, 3, 4, 1 << 31, 1<<32 - 2, 1<<32 - 1}),
		id("identity_u64", infer.Uint64, []uint64{0, 1, 2, 3, 4, 1 << 63, 1<<64 - 2, 1<<64 - 1}),
		id("identity_f16", infer.Float16, []infer.F16{0x3c00, 0xc000, 0x7bff, 0x0001, 0x3800, 0x7c00, 0x8000, 0x3555}),
		id("identity_bf16", infer.BFloat16, []infer.BF16{0x3f80, 0xc000, 0x7f7f, 0x0001, 0x3f00, 0x7f80, 0x8000, 0x3eab}),
		{"cast_f32_f16", infer.Tensor{DType: infer.Float32, Shape: s, Data: f32}, infer.Tensor{DType: infer.Float16, Shape: s, Data: f16}},
		{"cast_f16_f32", infer.Tensor{DType: infer.Float16, Shape: s, Data: f16}, infer.Tensor{DType: infer.Float32, Shape: s, Data: back}},
	}
}

func newSession(t testing.TB, name string) *infer.Session {
	t.Helper()
	return infertest.NewSession(t, model(name))
}

func TestSessionDTypes(t *testing.T) {
	for _, tc := range append(dtypeCases(), newDTypeCases()...) {
		t.Run(tc.model, func(t *testing.T) {
			s := newSession(t, tc.model)
			info := s.Info()
			if got := info.Inputs[0].DType; got != tc.in.DType {
				t.Errorf("input dtype: got %s, want %s", got, tc.in.DType)
			}
			if got, want := info.Inputs[0].Shape, []int64{-1, 4}; !reflect.DeepEqual(got, want) {
				t.Errorf("input shape: got %v, want %v", got, want)
			}
			if !info.DynamicBatch {
				t.Error("DynamicBatch: got false, want true")
			}
			out, err := s.Run([]infer.Tensor{tc.in})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(out[0], tc.want) {
				t.Errorf("Run: got %+v, want %+v", out[0], tc.want)
			}
		})
	}
}

func TestSessionErrors(t *testing.T) {
	s := newSession(t, "add_f32")
	var ie *infer.InputError
	if _, err := s.Run([]infer.Tensor{{DType: infer.Int64, Shape: []int64{1, 4}, Data: []int64{1, 2, 3, 4}}}); !errors.As(err, &ie) {
		t.Errorf("Run(wrong dtype): got %v, want *InputError", err)
	}
	if _, err := s.Run(nil); !errors.As(err, &ie) {
		t.Errorf("Run(no inputs): got %v, want *InputError", err)
	}
	if _, err := s.Run([]infer.Tensor{{DType: infer.Float32, Shape: []int64{1, 3}, Data: []float32{1, 2, 3}}}); err == nil {
		t.Error("Run(wrong shape): got nil error, want one from ONNX Runtime")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: got %v, want nil", err)
	}
	if _, err := s.Run([]infer.Tensor{infer.NewTensor(infer.Float32, []int64{1, 4})}); !errors.Is(err, infer.ErrClosed) {
		t.Errorf("Run after Close: got %v, want ErrClosed", err)
	}
}

func TestSessionInfo(t *testing.T) {
	tests := []struct {
		model        string
		inputs       int
		outputs      int
		firstShape   []int64
		dynamicBatch bool
	}{
		{"two_io", 2, 2, []int64{-1, 3}, true},
		{"fixed_f32", 1, 1, []int64{1, 4}, false},
		{"matmul_dyn", 1, 1, []int64{-1, -1, 4}, true},
		{"classifier", 1, 1, []int64{-1, 8}, true},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			info := newSession(t, tt.model).Info()
			if len(info.Inputs) != tt.inputs || len(info.Outputs) != tt.outputs {
				t.Errorf("got %d inputs %d outputs, want %d %d", len(info.Inputs), len(info.Outputs), tt.inputs, tt.outputs)
			}
			if !reflect.DeepEqual(info.Inputs[0].Shape, tt.firstShape) {
				t.Errorf("input shape: got %v, want %v", info.Inputs[0].Shape, tt.firstShape)
			}
			if info.DynamicBatch != tt.dynamicBatch {
				t.Errorf("DynamicBatch: got %v, want %v", info.DynamicBatch, tt.dynamicBatch)
			}
			if info.Name != tt.model {
				t.Errorf("Name: got %q, want %q", info.Name, tt.model)
			}
		})
	}
}

// BenchmarkSession is the raw ONNX Runtime baseline: add_f32, batch 1.
func BenchmarkSession(b *testing.B) {
	s := newSession(b, "add_f32")
	in := []infer.Tensor{{DType: infer.Float32, Shape: []int64{1, 4}, Data: []float32{1, 2, 3, 4}}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Run(in); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSessionHalfOutputShapes runs float16 outputs whose dynamic dims are
// known before the run only through their names: the binding cannot read
// back a float16 output ONNX Runtime allocated, so Session allocates it.
func TestSessionHalfOutputShapes(t *testing.T) {
	x := infer.Tensor{DType: infer.Float32, Shape: []int64{2, 3}, Data: []float32{1, 2, 3, 0.5, -1, 65504}}
	want := make([]infer.F16, 6)
	for i, v := range x.Data.([]float32) {
		want[i] = infer.F16From(v)
	}
	out, err := newSession(t, "cast_f32_f16_seq").Run([]infer.Tensor{x})
	if err != nil {
		t.Fatal(err)
	}
	if got := out[0]; !reflect.DeepEqual(got.Shape, x.Shape) || !reflect.DeepEqual(got.Data, want) {
		t.Errorf("cast_f32_f16_seq: got %v %v, want %v %v", got.Shape, got.Data, x.Shape, want)
	}
	// Zero-size tensors both ways: the binding refuses an empty buffer.
	empty := infer.Tensor{DType: infer.Float32, Shape: []int64{2, 0}, Data: []float32{}}
	out, err = newSession(t, "cast_f32_f16_seq").Run([]infer.Tensor{empty})
	if err != nil || !reflect.DeepEqual(out[0].Shape, []int64{2, 0}) || !reflect.DeepEqual(out[0].Data, []infer.F16{}) {
		t.Errorf("cast_f32_f16_seq of [2 0]: got %+v, %v; want an empty [2 0] float16 tensor", out, err)
	}
	emptyHalf := infer.Tensor{DType: infer.Float16, Shape: []int64{0, 4}, Data: []infer.F16{}}
	out, err = newSession(t, "identity_f16").Run([]infer.Tensor{emptyHalf})
	if err != nil || !reflect.DeepEqual(out[0], emptyHalf) {
		t.Errorf("identity_f16 of [0 4]: got %+v, %v; want %+v", out, err, emptyHalf)
	}
	_, err = newSession(t, "cast_f32_f16_free").Run([]infer.Tensor{x})
	if err == nil || !strings.Contains(err.Error(), "float16/bfloat16 output needs a shape") {
		t.Errorf("cast_f32_f16_free: got %v, want an error saying the output's shape is unknown", err)
	}
}

// TestSessionStrings runs the committed STRING models: strings go into ONNX
// Runtime and come back as strings, any length, empty and non-ASCII ones
// included, and Cast converts between STRING and FLOAT as ONNX says.
func TestSessionStrings(t *testing.T) {
	long := strings.Repeat("x", 1<<16)
	tests := []struct {
		model string
		in    []infer.Tensor
		want  infer.Tensor
	}{
		{"identity_str",
			[]infer.Tensor{{DType: infer.String, Shape: []int64{2, 2}, Data: []string{"a", "", "héllo wörld", long}}},
			infer.Tensor{DType: infer.String, Shape: []int64{2, 2}, Data: []string{"a", "", "héllo wörld", long}}},
		{"identity_str",
			[]infer.Tensor{{DType: infer.String, Shape: []int64{0, 2}, Data: []string{}}},
			infer.Tensor{DType: infer.String, Shape: []int64{0, 2}, Data: []string{}}},
		{"identity_str",
			[]infer.Tensor{{DType: infer.String, Shape: []int64{1, 2}, Data: []string{"", ""}}},
			infer.Tensor{DType: infer.String, Shape: []int64{1, 2}, Data: []string{"", ""}}},
		{"cast_str_f32",
			[]infer.Tensor{{DType: infer.String, Shape: []int64{1, 3}, Data: []string{"1.5", "-2", "1e3"}}},
			infer.Tensor{DType: infer.Float32, Shape: []int64{1, 3}, Data: []float32{1.5, -2, 1000}}},
		{"cast_f32_str",
			[]infer.Tensor{{DType: infer.Float32, Shape: []int64{1, 3}, Data: []float32{1.5, -2, 0}}},
			infer.Tensor{DType: infer.String, Shape: []int64{1, 3}, Data: []string{"1.5", "-2", "0"}}},
		// A rank-0 string output, which ONNX Runtime allocates.
		{"pick_str",
			[]infer.Tensor{
				{DType: infer.String, Shape: []int64{3}, Data: []string{"zero", "one", "two"}},
				{DType: infer.Int64, Shape: []int64{}, Data: []int64{1}},
			},
			infer.Tensor{DType: infer.String, Shape: []int64{}, Data: []string{"one"}}},
		{"pick_str",
			[]infer.Tensor{
				{DType: infer.String, Shape: []int64{2}, Data: []string{"a", ""}},
				{DType: infer.Int64, Shape: []int64{}, Data: []int64{1}},
			},
			infer.Tensor{DType: infer.String, Shape: []int64{}, Data: []string{""}}},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			s := newSession(t, tt.model)
			if got := s.Info().Inputs[0].DType; got != tt.in[0].DType {
				t.Errorf("input dtype: got %s, want %s", got, tt.in[0].DType)
			}
			out, err := s.Run(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			got := out[0]
			if got.DType != tt.want.DType || !reflect.DeepEqual(got.Shape, tt.want.Shape) || got.Len() != tt.want.Len() ||
				got.Len() > 0 && !reflect.DeepEqual(got.Data, tt.want.Data) {
				t.Errorf("Run: got %s %v %.80q, want %s %v %.80q", got.DType, got.Shape, got.Data, tt.want.DType, tt.want.Shape, tt.want.Data)
			}
		})
	}
}

func TestSessionStringErrors(t *testing.T) {
	s := newSession(t, "identity_str")
	var ie *infer.InputError
	_, err := s.Run([]infer.Tensor{{DType: infer.String, Shape: []int64{1, 2}, Data: []string{"ok", "a\x00b"}}})
	if !errors.As(err, &ie) || ie.Input != "x" || !strings.Contains(err.Error(), "NUL") {
		t.Errorf("Run(NUL byte): got %v, want an *InputError naming x and the NUL byte", err)
	}
	_, err = s.Run([]infer.Tensor{{DType: infer.Float32, Shape: []int64{1, 2}, Data: []float32{1, 2}}})
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "want string") {
		t.Errorf("Run(float32 for a string): got %v, want an *InputError naming the dtypes", err)
	}
	_, err = s.Run([]infer.Tensor{{DType: infer.String, Shape: []int64{1, 2}, Data: []string{"one"}}})
	if !errors.As(err, &ie) {
		t.Errorf("Run(too few strings): got %v, want an *InputError", err)
	}
}

// TestSessionStringScalarInput: the binding cannot make a rank-0 string
// tensor, so a model with a rank-0 string input is refused at load, with
// an error naming the input, rather than failing every request.
func TestSessionStringScalarInput(t *testing.T) {
	requireORT(t)
	_, err := infer.NewSession(model("identity_str_scalar"), 1)
	if !errors.Is(err, infer.ErrUnsupportedDType) || !strings.Contains(err.Error(), `input "x" is a rank-0 string`) {
		t.Errorf("got %v, want ErrUnsupportedDType naming input x", err)
	}
}
