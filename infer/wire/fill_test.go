package wire_test

import (
	"slices"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/wire"
)

func TestFillRequest(t *testing.T) {
	f32 := infer.IO{Name: "x", DType: infer.Float32, Shape: []int64{-1, 2, -1}}
	str := infer.IO{Name: "s", DType: infer.String, Shape: []int64{-1, 1}}
	for _, tc := range []struct {
		name     string
		inputs   []infer.IO
		batched  bool
		override []int64
		want     string
	}{
		{"batch dim dropped, dynamic dim 1", []infer.IO{f32}, false, nil, `{"instances":[{"x":[[0.5],[0.5]]}]}`},
		{"batched keeps dim 0", []infer.IO{f32}, true, nil, `{"instances":[{"x":[[[0.5],[0.5]]]}]}`},
		{"override", []infer.IO{f32}, false, []int64{3}, `{"instances":[{"x":[0.5,0.5,0.5]}]}`},
		{"string input quoted", []infer.IO{f32, str}, false, nil, `{"instances":[{"x":[[0.5],[0.5]],"s":["0.5"]}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(wire.FillRequest(infer.ModelInfo{Inputs: tc.inputs}, tc.batched, "0.5", tc.override))
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestFillValueAndShape(t *testing.T) {
	f32 := infer.IO{Name: "x", DType: infer.Float32, Shape: []int64{-1, 3, -1}}
	i64 := infer.IO{Name: "n", DType: infer.Int64, Shape: []int64{-1}}
	if got := wire.FillValue(infer.ModelInfo{Inputs: []infer.IO{f32}}); got != "0.5" {
		t.Errorf("FillValue(float) = %q, want 0.5", got)
	}
	if got := wire.FillValue(infer.ModelInfo{Inputs: []infer.IO{f32, i64}}); got != "1" {
		t.Errorf("FillValue(float, int64) = %q, want 1", got)
	}
	if got := wire.FillShape(infer.ModelInfo{Inputs: []infer.IO{f32}}, false); !slices.Equal(got, []int64{3, 1}) {
		t.Errorf("FillShape = %v, want [3 1]", got)
	}
	if got := wire.FillShape(infer.ModelInfo{Inputs: []infer.IO{f32, i64}}, false); got != nil {
		t.Errorf("FillShape of two inputs = %v, want none", got)
	}
	if !slices.Equal(f32.Shape, []int64{-1, 3, -1}) {
		t.Errorf("FillShape changed the model's shape: %v", f32.Shape)
	}
}
