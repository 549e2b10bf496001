package infer_test

import (
	"errors"
	"reflect"
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

func newSession(t testing.TB, name string) *infer.Session {
	t.Helper()
	return infertest.NewSession(t, model(name))
}

func TestSessionDTypes(t *testing.T) {
	for _, tc := range dtypeCases() {
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
