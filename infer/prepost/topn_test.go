package prepost_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
)

// tensorString formats t as "dtype shape data", NaN and all.
func tensorString(t infer.Tensor) string {
	return fmt.Sprintf("%s %s %v", t.DType, infer.ShapeString(t.Shape), t.Data)
}

func TestTopN(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	tests := []struct {
		name, pbtxt string
		record      infer.Tensor
		want        []string // indices, values, text
	}{
		{"SPEC example", topNHead + param("postProcessing", "topN(2)"), f32([]int64{5}, 3, 2, 1, 4, 5),
			[]string{"int64 [2] [4 3]", "float32 [2] [5 4]", "string [1] [[[4,5.0][3,4.0]]]"}},
		{"ties by index, NaN last", topNHead + param("postProcessing", "topN(5)"), f32([]int64{6}, 0.5, nan, 2, 2, -inf, 1e-5),
			[]string{"int64 [5] [2 3 0 5 4]", "float32 [5] [2 2 0.5 1e-05 -Inf]", "string [1] [[[2,2.0][3,2.0][0,0.5][5,1.0E-5][4,-Infinity]]]"}},
		{"n past the scores", topNHead + param("postProcessing", "topN(9)"), f32([]int64{3}, inf, nan, 0.1306194),
			[]string{"int64 [3] [0 2 1]", "float32 [3] [+Inf 0.1306194 NaN]", "string [1] [[[0,Infinity][2,0.1306194][1,NaN]]]"}},
		{"whole: each row", topNHead + param("postProcessing", "topN(1)"), f32([]int64{2, 3}, 1, 9, 2, 7, 3, 8),
			[]string{"int64 [2 1] [1 2]", "float32 [2 1] [9 8]", "string [2 1] [[[1,9.0]] [[2,8.0]]]"}},
		{"whole with no rows", topNHead + param("postProcessing", "topN(1)"), f32([]int64{0, 3}),
			[]string{"int64 [0 1] []", "float32 [0 1] []", "string [0 1] []"}},
		{"rank 2 rows flatten", topNHead + param("postProcessing", "topN(2)") + `input { name: "scores" data_type: TYPE_FP32 dims: [2, 2] }`,
			f32([]int64{2, 2}, 1, 4, 3, 2), []string{"int64 [2] [1 2]", "float32 [2] [4 3]", "string [1] [[[1,4.0][2,3.0]]]"}},
		{"max_batch_size 0 flattens all", strings.Replace(topNHead, "max_batch_size: 8", "max_batch_size: 0", 1) + param("postProcessing", "topN(2)") +
			`input { name: "scores" data_type: TYPE_FP32 dims: [1, -1] }`,
			f32([]int64{1, 4}, 1, 4, 3, 2), []string{"int64 [2] [1 2]", "float32 [2] [4 3]", "string [1] [[[1,4.0][2,3.0]]]"}},
		{"int scores", topNHead + param("postProcessing", "topN(2)") + `input { name: "scores" data_type: TYPE_INT32 dims: [3] }`,
			infer.Tensor{DType: infer.Int32, Shape: []int64{3}, Data: []int32{-7, 16777217, 3}},
			[]string{"int64 [2] [1 2]", "float32 [2] [1.6777216e+07 3]", "string [1] [[[1,1.6777216E7][2,3.0]]]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := newStep(t, tt.pbtxt).Infer(context.Background(), [][]infer.Tensor{{tt.record}})
			if err != nil {
				t.Fatal(err)
			}
			for j, want := range tt.want {
				if got := tensorString(out[0][j]); got != want {
					t.Errorf("output %d: got %s, want %s", j, got, want)
				}
			}
		})
	}
}

func TestTopNOutputsAsListed(t *testing.T) {
	s := newStep(t, topNHead+param("postProcessing", "topN(3)")+`input { name: "scores" data_type: TYPE_FP32 dims: [4] }`+
		`output { name: "text" data_type: TYPE_STRING dims: [1] } output { name: "indices" data_type: TYPE_INT64 dims: [3] }`)
	out, err := s.Infer(context.Background(), [][]infer.Tensor{{f32([]int64{4}, 1, 2, 3, 4)}, {f32([]int64{4}, 4, 3, 2, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, rec := range out {
		for _, o := range rec {
			got = append(got, tensorString(o))
		}
	}
	want := []string{"string [1] [[[3,4.0][2,3.0][1,2.0]]]", "int64 [3] [3 2 1]", "string [1] [[[0,4.0][1,3.0][2,2.0]]]", "int64 [3] [0 1 2]"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestTopNErrors(t *testing.T) {
	s := newStep(t, topNHead+param("postProcessing", "topN(3)")+`input { name: "scores" data_type: TYPE_FP32 dims: [4] }`)
	tests := []struct {
		name   string
		record infer.Tensor
		want   string
	}{
		{"wrong size", f32([]int64{3}, 1, 2, 3), `instance 0: input "scores": shape [3] does not match the step's [-1 4]`},
		{"wrong dtype", infer.Tensor{DType: infer.Float64, Shape: []int64{4}, Data: []float64{1, 2, 3, 4}}, "wrong dtype: got float64, want float32"},
		{"data short", f32([]int64{4}, 1, 2), "shape [4] needs 4 elements, data has 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Infer(context.Background(), [][]infer.Tensor{{tt.record}})
			var ie *infer.InputError
			if !errors.As(err, &ie) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an *infer.InputError holding %q", err, tt.want)
			}
		})
	}
}
