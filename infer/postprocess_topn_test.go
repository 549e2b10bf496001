package infer_test

import (
	"math"
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
)

func f32(shape []int64, v ...float32) infer.Tensor {
	return infer.Tensor{DType: infer.Float32, Shape: shape, Data: v}
}

func TestTopNAndPickTopN(t *testing.T) {
	tests := []struct {
		name string
		post string
		in   infer.Tensor
		want string
	}{
		// The two examples SPEC §2 pins.
		{"spec topN", "topN(2)", f32([]int64{5}, 3, 2, 1, 4, 5), "[[4,5.0][3,4.0]]"},
		{"spec pickTopN", "pickTopN(2)", f32([]int64{4, 2}, 2, 2, 3, 3, 4, 4, 5, 5), "[[2.0,2.0][3.0,3.0]]"},
		{"topN ties keep index order", "topN(3)", f32([]int64{1, 4}, 1, 2, 2, 0), "[[1,2.0][2,2.0][0,1.0]]"},
		{"topN n past size", "topN(9)", f32([]int64{2}, 0.5, 0.25), "[[0,0.5][1,0.25]]"},
		{"topN NaN last", "topN(2)", f32([]int64{2}, float32(math.NaN()), 1), "[[1,1.0][0,NaN]]"},
		{"topN int output", "topN(1)", infer.Tensor{DType: infer.Int64, Shape: []int64{3}, Data: []int64{1, 7, 3}}, "[[1,7.0]]"},
		{"pickTopN squeezes 3-D", "pickTopN(1)", f32([]int64{1, 2, 2}, 1, 2, 3, 4), "[[1.0,2.0]]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := infer.ParsePostProcessing(tt.post)
			if err != nil {
				t.Fatal(err)
			}
			got, ok, err := p.Apply([]infer.Tensor{tt.in})
			if err != nil || !ok {
				t.Fatalf("Apply: got ok=%v err=%v", ok, err)
			}
			if got != tt.want {
				t.Errorf("%s: got %s, want %s", tt.post, got, tt.want)
			}
		})
	}
	if _, err := infer.PickTopN(f32([]int64{8}, 1, 2, 3, 4, 5, 6, 7, 8), 1); err == nil {
		t.Error("PickTopN(1-D): got nil error, want one")
	}
}

// TestApplyWithoutOutputs: no post-processing answers nothing, and each
// kind refuses a model without outputs, naming itself.
func TestApplyWithoutOutputs(t *testing.T) {
	if got, ok, err := (infer.PostProcess{}).Apply(nil); got != "" || ok || err != nil {
		t.Errorf("zero PostProcess: got %q, %v, %v, want \"\", false, nil", got, ok, err)
	}
	for _, post := range []string{"topN(1)", "pickTopN(1)"} {
		p, err := infer.ParsePostProcessing(post)
		if err != nil {
			t.Fatal(err)
		}
		_, ok, err := p.Apply(nil)
		if !ok || err == nil || !strings.HasPrefix(err.Error(), p.Kind+": model has no output") {
			t.Errorf("%s with no outputs: got ok=%v err=%v, want ok and an error naming %s", post, ok, err, p.Kind)
		}
	}
}

func TestJavaFloat(t *testing.T) {
	tests := []struct {
		in   float32
		want string
	}{
		{5, "5.0"},
		{0.1306194, "0.1306194"},
		{1e-5, "1.0E-5"},
		{12345678, "1.2345678E7"},
		{1e7, "1.0E7"},
		{9999999, "9999999.0"},
		{0.001, "0.001"},
		{0.0009, "9.0E-4"},
		{0, "0.0"},
		{float32(math.Copysign(0, -1)), "-0.0"},
		{-2.5, "-2.5"},
		{100, "100.0"},
		{0.1, "0.1"},
		{1.0e10, "1.0E10"},
		{-3.4028235e38, "-3.4028235E38"},
		{3.4028235e38, "3.4028235E38"},
		{float32(math.NaN()), "NaN"},
		{float32(math.Inf(1)), "Infinity"},
		{float32(math.Inf(-1)), "-Infinity"},
	}
	for _, tt := range tests {
		if got := infer.JavaFloat(tt.in); got != tt.want {
			t.Errorf("JavaFloat(%g): got %s, want %s", tt.in, got, tt.want)
		}
	}
}
