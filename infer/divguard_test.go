package infer_test

import (
	"context"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
)

func i32(v ...int32) infer.Tensor {
	return infer.Tensor{DType: infer.Int32, Shape: []int64{int64(len(v))}, Data: v}
}

// TestDivisionGuard sends divisors that would raise SIGFPE in ONNX
// Runtime (and end the test binary) if they reached it: each must be a
// 400 naming the input, and the engine must serve the next record.
func TestDivisionGuard(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		model   string
		bad     []infer.Tensor // refused, naming input want
		want    string
		good    []infer.Tensor // served next, answering out
		wantOut infer.Tensor
	}{
		{"zero", "div_i32", []infer.Tensor{i32(1, 0, 2, 3)}, "x", []infer.Tensor{i32(1, -1, 3, 100)}, i32(100, -100, 33, 1)},
		{"zero", "divmod_i32", []infer.Tensor{i32(7, 7, 7, 7), i32(1, 2, 0, 3)}, "b",
			[]infer.Tensor{i32(7, 7, 7, 7), i32(2, -1, 3, 7)}, i32(3, -7, 2, 1)},
		{"min by -1", "divmod_i32", []infer.Tensor{i32(math.MinInt32, 1, 2, 3), i32(2, -1, 3, 7)}, "b",
			[]infer.Tensor{i32(math.MinInt32, 1, 2, 3), i32(2, 1, 3, 7)}, i32(math.MinInt32/2, 1, 0, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.model+"/"+tt.name, func(t *testing.T) {
			e := newEngine(t, infer.Config{ModelPath: infertest.Model(tt.model)})
			_, err := e.Infer(ctx, [][]infer.Tensor{tt.bad})
			var ie *infer.InputError
			if !errors.As(err, &ie) || ie.Input != tt.want {
				t.Fatalf("got %v, want an *InputError naming input %q", err, tt.want)
			}
			outs, err := e.Infer(ctx, [][]infer.Tensor{tt.good})
			if err != nil {
				t.Fatalf("next record: %v", err)
			}
			if got := outs[0][0]; !reflect.DeepEqual(got, tt.wantOut) {
				t.Errorf("next record: got %+v, want %+v", got, tt.wantOut)
			}
		})
	}
}

// TestDivisionGuardLoad: a constant zero divisor fails the load naming the
// node; a divisor computed inside the graph loads (no warm-up) and serves
// a record whose divisor is not zero.
func TestDivisionGuardLoad(t *testing.T) {
	infertest.RequireLibrary(t)
	_, err := infer.New(infer.Config{ModelPath: infertest.Model("div_zero_const_i32")})
	if err == nil || !strings.Contains(err.Error(), `constant "zero", which holds a zero`) {
		t.Errorf("div_zero_const_i32: got %v, want an error naming the zero constant", err)
	}
	e := newEngine(t, infer.Config{ModelPath: infertest.Model("div_computed_i32")})
	outs, err := e.Infer(context.Background(), [][]infer.Tensor{{i32(2, 3, 5, 9)}})
	if err != nil {
		t.Fatalf("div_computed_i32: %v", err)
	}
	if got, want := outs[0][0], i32(2, 1, 1, 1); !reflect.DeepEqual(got, want) {
		t.Errorf("div_computed_i32: got %+v, want %+v", got, want)
	}
}
