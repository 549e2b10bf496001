package infer_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
)

// TestEngineEdgeModels loads the models that once crashed the server at
// load (scalar inputs and outputs, no inputs, integer division by the
// input) and runs a request through each.
func TestEngineEdgeModels(t *testing.T) {
	ctx := context.Background()
	x := infer.Tensor{DType: infer.Float32, Shape: []int64{4}, Data: []float32{-2, 0.5, 1, 3}}
	scalar := func(v float32) infer.Tensor {
		return infer.Tensor{DType: infer.Float32, Shape: []int64{}, Data: []float32{v}}
	}
	tests := []struct {
		model string
		rec   []infer.Tensor
		want  infer.Tensor
	}{
		{"clip_scalar", []infer.Tensor{x, scalar(0), scalar(1)},
			infer.Tensor{DType: infer.Float32, Shape: []int64{4}, Data: []float32{0, 0.5, 1, 1}}},
		{"sum_scalar", []infer.Tensor{x}, scalar(2.5)},
		{"div_i32", []infer.Tensor{{DType: infer.Int32, Shape: []int64{4}, Data: []int32{1, 2, 4, 5}}},
			infer.Tensor{DType: infer.Int32, Shape: []int64{4}, Data: []int32{100, 50, 25, 20}}},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			e := newEngine(t, infer.Config{ModelPath: infertest.Model(tt.model)})
			outs, err := e.Infer(ctx, [][]infer.Tensor{tt.rec})
			if err != nil {
				t.Fatalf("Infer: %v", err)
			}
			if got := outs[0][0]; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	t.Run("no_inputs", func(t *testing.T) {
		e := newEngine(t, infer.Config{ModelPath: infertest.Model("no_inputs")})
		_, err := e.Infer(ctx, [][]infer.Tensor{{}})
		if !errors.Is(err, infer.ErrNoInputs) {
			t.Errorf("got %v, want ErrNoInputs", err)
		}
	})
}

// TestSessionZeroSizeDim runs a batch of zero rows straight through a
// session: ONNX Runtime takes it and answers zero rows.
func TestSessionZeroSizeDim(t *testing.T) {
	s := infertest.NewSession(t, infertest.Model("add_f32"))
	outs, err := s.Run([]infer.Tensor{infer.NewTensor(infer.Float32, []int64{0, 4})})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := outs[0].Shape; !reflect.DeepEqual(got, []int64{0, 4}) {
		t.Errorf("got shape %v, want [0 4]", got)
	}
}

// TestStackSplitScalar checks that a rank-0 tensor, which has no rows, is
// an error for Stack and Split rather than a panic.
func TestStackSplitScalar(t *testing.T) {
	s := infer.Tensor{DType: infer.Float32, Shape: []int64{}, Data: []float32{1}}
	if _, err := infer.Stack([]infer.Tensor{s, s}); !errors.Is(err, infer.ErrNoBatchDim) {
		t.Errorf("Stack: got %v, want ErrNoBatchDim", err)
	}
	if _, err := infer.Split(s, []int64{1, 1}); !errors.Is(err, infer.ErrNoBatchDim) {
		t.Errorf("Split: got %v, want ErrNoBatchDim", err)
	}
	row := infer.Tensor{DType: infer.Float32, Shape: []int64{2, 1}, Data: []float32{1, 2}}
	if _, err := infer.Split(row, []int64{1, 2}); err == nil {
		t.Error("Split with rows that do not sum to dim 0: got nil, want an error")
	}
}
