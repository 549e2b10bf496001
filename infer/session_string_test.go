package infer_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
)

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

// TestEngineStrings runs string records through the Engine from
// concurrent callers: the Batcher stacks their rows into one string
// tensor and splits the outputs back, each caller getting its own
// strings. A record holding a NUL byte is refused before it joins a batch,
// naming its instance and input.
func TestEngineStrings(t *testing.T) {
	e := newEngine(t, infer.Config{ModelPath: model("identity_str"), MaxBatch: 8})
	const callers = 8
	var wg sync.WaitGroup
	errs := make([]error, callers)
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var recs [][]infer.Tensor
			for r := range 3 {
				recs = append(recs, []infer.Tensor{{DType: infer.String, Shape: []int64{2}, Data: []string{fmt.Sprintf("c%d", c), strings.Repeat("é", r)}}})
			}
			outs, err := e.Infer(context.Background(), recs)
			if err != nil {
				errs[c] = err
				return
			}
			for r, rec := range outs {
				if !reflect.DeepEqual(rec[0], recs[r][0]) {
					errs[c] = fmt.Errorf("record %d: got %+v, want %+v", r, rec[0], recs[r][0])
					return
				}
			}
		}()
	}
	wg.Wait()
	for c, err := range errs {
		if err != nil {
			t.Errorf("caller %d: %v", c, err)
		}
	}

	_, err := e.Infer(context.Background(), [][]infer.Tensor{
		{{DType: infer.String, Shape: []int64{2}, Data: []string{"a", "b"}}},
		{{DType: infer.String, Shape: []int64{2}, Data: []string{"a\x00", "b"}}},
	})
	var ie *infer.InputError
	if !errors.As(err, &ie) || ie.Instance != 1 || ie.Input != "x" || !strings.Contains(err.Error(), "NUL byte") {
		t.Errorf("got %v, want an *InputError naming instance 1, input x and the NUL byte", err)
	}
}
