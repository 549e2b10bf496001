package infer_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
)

// TestBatchingDecision loads the test models under each batching mode and
// checks the decision and the reason the metadata and status report.
func TestBatchingDecision(t *testing.T) {
	tests := []struct {
		model, mode string
		batch       bool
		reason      string
	}{
		{"add_f32", "", true, "dim 0 of every input and output is dynamic"},
		{"matmul_dyn", "auto", true, "dim 0 of every input and output is dynamic"},
		{"two_io", "", true, "dim 0 of every input and output is dynamic"},
		{"fixed_f32", "", false, `input "x" has fixed dim 0 = 1`},
		{"sum_batch", "", false, `output "y" has fixed dim 0 = 1`},
		{"sum_scalar", "", false, `output "y" is a scalar`},
		{"clip_scalar", "", false, `input "lo" is a scalar`},
		{"add_f32", "off", false, "config batching: off"},
		{"sum_batch", "on", true, "config batching: on"},
	}
	for _, tt := range tests {
		t.Run(tt.model+"/"+tt.mode, func(t *testing.T) {
			info := newEngine(t, infer.Config{ModelPath: model(tt.model), Batching: tt.mode}).Info()
			if info.DynamicBatch != tt.batch || info.BatchReason != tt.reason {
				t.Errorf("got batching %v (%s), want %v (%s)", info.DynamicBatch, info.BatchReason, tt.batch, tt.reason)
			}
		})
	}
}

// TestBatchingOnRefused: "on" cannot stack records into an input whose
// dim 0 is fixed, so the load fails naming the input.
func TestBatchingOnRefused(t *testing.T) {
	infertest.RequireLibrary(t)
	for _, m := range []string{"fixed_f32", "clip_scalar"} {
		_, err := infer.New(infer.Config{ModelPath: model(m), Batching: "on"})
		if !errors.Is(err, infer.ErrBatching) {
			t.Errorf("%s: got %v, want ErrBatching", m, err)
		}
	}
	want := `batching "on": input "x" has fixed dim 0 = 1, so records cannot be stacked along it`
	if _, err := infer.New(infer.Config{ModelPath: model("fixed_f32"), Batching: "on"}); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want it to say %q", err, want)
	}
	if _, err := infer.New(infer.Config{ModelPath: model("add_f32"), Batching: "sometimes"}); !errors.Is(err, infer.ErrConfigValidation) {
		t.Errorf("batching sometimes: got %v, want ErrConfigValidation", err)
	}
}

// TestBatchingRuns: one request of three records is one run of three
// rows when the model batches, and three runs of one row when it does not
// (batching off, or an output whose dim 0 is fixed).
func TestBatchingRuns(t *testing.T) {
	rec := func() []infer.Tensor {
		return []infer.Tensor{{DType: infer.Float32, Shape: []int64{4}, Data: []float32{1, 2, 3, 4}}}
	}
	tests := []struct {
		model, mode string
		want        []int // rows per run
	}{
		{"add_f32", "", []int{3}},
		{"add_f32", "off", []int{1, 1, 1}},
		{"sum_batch", "", []int{1, 1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.model+"/"+tt.mode, func(t *testing.T) {
			var mu sync.Mutex
			var runs []int
			e := newEngine(t, infer.Config{ModelPath: model(tt.model), Batching: tt.mode, Hooks: infer.Hooks{Batch: func(items, rows int) {
				mu.Lock()
				runs = append(runs, rows)
				mu.Unlock()
			}}})
			if _, err := e.Infer(context.Background(), [][]infer.Tensor{rec(), rec(), rec()}); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(runs) != len(tt.want) {
				t.Fatalf("got runs of %v rows, want %v", runs, tt.want)
			}
			for i := range runs {
				if runs[i] != tt.want[i] {
					t.Errorf("got runs of %v rows, want %v", runs, tt.want)
				}
			}
		})
	}
}
