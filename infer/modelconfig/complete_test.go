package modelconfig_test

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer/modelconfig"
)

// TestComplete covers the max_batch_size rules of Triton's
// AutoCompleteMaxBatch beyond its own tests, on the simple example's
// graph (dim 0 dynamic everywhere) and a graph without a batch dim.
func TestComplete(t *testing.T) {
	batching := graphOf(t, filepath.Join(triton, "model_repository", "simple", "1", "model.onnx"))
	fixed := graphOf(t, filepath.Join(triton, "autofill_noplatform_success", "onnx", "no_config_no_batch", "1", "model.onnx"))
	const io = `input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ -1, 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ -1, 16 ] } ]
	output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ -1, 16 ] } ]`
	tests := []struct {
		name, text string
		fixed      bool
		maxBatch   int
		wantMax    int32
		preferred  []int32 // nil: no dynamic_batching
		dims       []int64 // of the first input
	}{
		{"engine's batch size", ``, false, 16, 16, []int32{16}, []int64{16}},
		{"default", ``, false, 0, 4, []int32{4}, []int64{16}},
		{"batch of 1, no dynamic batching", ``, false, 1, 1, nil, []int64{16}},
		{"config's own", `max_batch_size: 2 dynamic_batching { max_queue_delay_microseconds: 5 }`, false, 16, 2, []int32{2}, []int64{16}},
		{"listed inputs and outputs: untouched", `max_batch_size: 0 ` + io, false, 16, 0, nil, []int64{-1, 16}},
		{"0 reads as unset while outputs are missing", `input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] } ]`, false, 8, 8, []int32{8}, []int64{16}},
		{"no batch dim", ``, true, 16, 0, nil, []int64{16}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, err := modelconfig.Parse([]byte(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			info := batching
			if tc.fixed {
				info = fixed
			}
			got := modelconfig.Complete(cfg, "m", info, tc.maxBatch)
			var preferred []int32
			if db := got.GetDynamicBatching(); db != nil {
				preferred = db.PreferredBatchSize
			}
			if got.MaxBatchSize != tc.wantMax || !slices.Equal(preferred, tc.preferred) || (got.GetDynamicBatching() == nil) != (tc.preferred == nil) ||
				!slices.Equal(got.Input[0].Dims, tc.dims) {
				t.Errorf("got max_batch_size %d, dynamic_batching %v, dims %v; want %d, %v, %v", got.MaxBatchSize, got.GetDynamicBatching(), got.Input[0].Dims, tc.wantMax, tc.preferred, tc.dims)
			}
			if got.Name != "m" || got.Platform != modelconfig.Platform || got.Backend != modelconfig.Backend || got.GetVersionPolicy().GetLatest().GetNumVersions() != 1 {
				t.Errorf("got name %q, platform %q, backend %q, policy %v", got.Name, got.Platform, got.Backend, got.VersionPolicy)
			}
		})
	}
	cfg, _, _ := modelconfig.Parse([]byte(`max_batch_size: 3`))
	if got := modelconfig.Complete(cfg, "m", batching, 16); got == cfg || cfg.Name != "" || len(cfg.Input) != 0 || cfg.VersionPolicy != nil {
		t.Errorf("Complete changed or returned its argument: %v", cfg)
	}
}
