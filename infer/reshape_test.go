package infer_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
)

// TestEngineReshape serves add_f32 (y = 2x+1, x and y [batch,4]) with a
// config.pbtxt-style reshape: clients send and get [2,2] per record, the
// graph takes and gives [4]; records batch along the kept dim 0.
func TestEngineReshape(t *testing.T) {
	e := newEngine(t, infer.Config{ModelPath: model("add_f32"), MaxBatch: 4, Reshape: map[string]infer.Reshape{
		"x": {Dims: []int64{2, 2}, Shape: []int64{4}},
		"y": {Dims: []int64{-1, 2}, Shape: []int64{4}},
	}})
	info := e.Info()
	if !reflect.DeepEqual(info.Inputs[0].Shape, []int64{-1, 2, 2}) || !reflect.DeepEqual(info.Outputs[0].Shape, []int64{-1, -1, 2}) || !info.DynamicBatch {
		t.Fatalf("Info: got %v -> %v (batching %v), want [-1 2 2] -> [-1 -1 2], batching", info.Inputs[0].Shape, info.Outputs[0].Shape, info.DynamicBatch)
	}
	records := [][]infer.Tensor{
		{f32([]int64{2, 2}, 1, 2, 3, 4)},
		{f32([]int64{1, 2, 2}, 0, 0, 0, 0)}, // already batched
	}
	outs, err := e.Infer(t.Context(), records)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]infer.Tensor{
		{f32([]int64{2, 2}, 3, 5, 7, 9)},
		{f32([]int64{1, 2, 2}, 1, 1, 1, 1)},
	}
	if !reflect.DeepEqual(outs, want) {
		t.Errorf("got %v, want %v", outs, want)
	}
	var ie *infer.InputError
	if _, err := e.Infer(t.Context(), [][]infer.Tensor{{f32([]int64{4}, 1, 2, 3, 4)}}); !errors.As(err, &ie) {
		t.Errorf("a record at the graph's shape: got %v, want an *InputError", err)
	}
}

// TestEngineReshapeWhole reshapes the whole tensor of a model that does
// not batch (fixed_f32: x, y [1,4]), as densenet_onnx's config does.
func TestEngineReshapeWhole(t *testing.T) {
	e := newEngine(t, infer.Config{ModelPath: model("fixed_f32"), Reshape: map[string]infer.Reshape{
		"x": {Dims: []int64{2, 2}, Shape: []int64{1, 4}},
		"y": {Dims: []int64{4}, Shape: []int64{1, 4}},
	}})
	outs, err := e.Infer(t.Context(), [][]infer.Tensor{{f32([]int64{2, 2}, 1, 2, 3, 4)}})
	if err != nil {
		t.Fatal(err)
	}
	if want := f32([]int64{4}, 3, 5, 7, 9); !reflect.DeepEqual(outs[0][0], want) {
		t.Errorf("got %v, want %v", outs[0][0], want)
	}
}

func TestEngineReshapeRejected(t *testing.T) {
	infertest.RequireLibrary(t)
	tests := map[string]map[string]infer.Reshape{
		"unknown name":    {"z": {Dims: []int64{4}, Shape: []int64{4}}},
		"shape too long":  {"x": {Dims: []int64{4}, Shape: []int64{1, 1, 4}}},
		"shape not graph": {"x": {Dims: []int64{5}, Shape: []int64{5}}},
		"counts differ":   {"x": {Dims: []int64{2, 3}, Shape: []int64{4}}},
	}
	for name, rs := range tests {
		t.Run(name, func(t *testing.T) {
			e, err := infer.New(infer.Config{ModelPath: model("add_f32"), Reshape: rs})
			if err == nil {
				e.Close()
			}
			if !errors.Is(err, infer.ErrConfigValidation) {
				t.Errorf("got %v, want ErrConfigValidation", err)
			}
		})
	}
}
