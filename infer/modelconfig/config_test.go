package modelconfig_test

import (
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

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

// TestCheck runs configs of Triton's simple example (INPUT0, INPUT1,
// OUTPUT0, OUTPUT1: INT32 [-1,16]) against its real graph.
func TestCheck(t *testing.T) {
	info := graphOf(t, filepath.Join(triton, "model_repository", "simple", "1", "model.onnx"))
	const io = `input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
	output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ -1 ] } ]`
	tests := []struct {
		name, text string
		err        error
		says       string
	}{
		{"ok", `max_batch_size: 8 ` + io, nil, ""},
		{"no batching", `max_batch_size: 0 input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 3, 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ -1, 16 ] } ]
			output [ { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 3, 16 ] } ]`, nil, ""},
		{"pytorch", `platform: "pytorch_libtorch"`, modelconfig.ErrPlatform, "torch.onnx.export"},
		{"tensorflow", `platform: "tensorflow_savedmodel"`, modelconfig.ErrPlatform, "tf2onnx"},
		{"python backend", `backend: "python"`, modelconfig.ErrPlatform, `backend "python"`},
		{"negative batch", `max_batch_size: -1 ` + io, modelconfig.ErrInvalid, "max_batch_size: got -1"},
		{"data type", `max_batch_size: 8 input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]`,
			modelconfig.ErrMismatch, "input[0].data_type: configuration expects datatype TYPE_FP32 for input 'INPUT0', model provides TYPE_INT32"},
		{"reshape fits", `max_batch_size: 8 input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 4, 4 ] reshape { shape: [ 16 ] } }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]`, nil, ""},
		{"reshape count", `max_batch_size: 8 input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 4, 5 ] reshape { shape: [ 16 ] } }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]`,
			modelconfig.ErrMismatch, "input[0].reshape.shape: [16] holds 16 elements, dims [4,5] hold 20"},
		{"reshape shape", `max_batch_size: 8 input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 2, 8 ] reshape { shape: [ 4, 4 ] } }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]`,
			modelconfig.ErrMismatch, "input[0].reshape.shape: model 'simple', tensor 'INPUT0'"},
		{"preferred", `max_batch_size: 8 dynamic_batching { preferred_batch_size: 16 } ` + io, modelconfig.ErrInvalid, "preferred_batch_size: 16"},
		{"accelerator", `max_batch_size: 8 optimization { execution_accelerators { gpu_execution_accelerator: [ { name: "openvino" } ] } } ` + io,
			modelconfig.ErrInvalid, "unknown Execution Accelerator 'openvino'"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, err := modelconfig.Parse([]byte(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			err = modelconfig.Check(modelconfig.Complete(cfg, "simple", info, 0), info)
			if !errors.Is(err, tc.err) || (tc.err != nil && !strings.Contains(err.Error(), tc.says)) {
				t.Errorf("got %v, want %v saying %q", err, tc.err, tc.says)
			}
		})
	}
}

func TestSettingsOf(t *testing.T) {
	tests := []struct {
		name, text string
		want       modelconfig.Settings
	}{
		{"empty", ``, modelconfig.Settings{}},
		{
			"dynamic batching",
			`max_batch_size: 8 dynamic_batching { preferred_batch_size: [ 4, 8 ] max_queue_delay_microseconds: 2000 }`,
			modelconfig.Settings{MaxBatch: 8, Dynamic: true, Preferred: []int{4, 8}, MaxQueueDelay: 2 * time.Millisecond},
		},
		{
			"cpu groups, default count 2",
			`instance_group [ { kind: KIND_CPU }, { count: 3 kind: KIND_CPU } ]`,
			modelconfig.Settings{Instances: 5, ExecutionProvider: "cpu"},
		},
		{"gpu group", `instance_group { count: 2 kind: KIND_GPU }`, modelconfig.Settings{Instances: 2, ExecutionProvider: "cuda"}},
		{
			"gpu accelerator on gpu",
			`instance_group { kind: KIND_GPU } optimization { execution_accelerators { gpu_execution_accelerator: [ { name: "tensorrt" } ] } }`,
			modelconfig.Settings{Instances: 1, ExecutionProvider: "tensorrt"},
		},
		{
			"gpu accelerator on cpu",
			`instance_group { kind: KIND_CPU } optimization { execution_accelerators { gpu_execution_accelerator: [ { name: "tensorrt" } ] } }`,
			modelconfig.Settings{Instances: 2, ExecutionProvider: "cpu"},
		},
		{
			"cpu accelerator on cpu",
			`instance_group { kind: KIND_CPU count: 1 } optimization { execution_accelerators { cpu_execution_accelerator: [ { name: "openvino" } ] } }`,
			modelconfig.Settings{Instances: 1, ExecutionProvider: "openvino"},
		},
		{
			"accelerator, no group",
			`optimization { execution_accelerators { gpu_execution_accelerator: [ { name: "cuda" } ] } }`,
			modelconfig.Settings{ExecutionProvider: "cuda"},
		},
		{
			"parameters and reshape",
			`parameters { key: "k" value: { string_value: "v" } }
			 input [ { name: "a" dims: [ 4 ] reshape { shape: [ 2, 2 ] } }, { name: "b" dims: [ 1 ] } ]
			 output [ { name: "s" dims: [ 1 ] reshape { } } ]`,
			modelconfig.Settings{
				Parameters: map[string]string{"k": "v"},
				Reshape:    map[string][]int64{"a": {2, 2}, "s": {}},
				Dims:       map[string][]int64{"a": {4}, "s": {1}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, err := modelconfig.Parse([]byte(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			if got := modelconfig.SettingsOf(cfg); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestVersions(t *testing.T) {
	disk := []int64{3, 1, 2, 7}
	tests := []struct {
		policy string
		want   []int64
		err    error
	}{
		{``, []int64{7}, nil},
		{`version_policy { latest { } }`, []int64{7}, nil},
		{`version_policy { latest { num_versions: 2 } }`, []int64{3, 7}, nil},
		{`version_policy { latest { num_versions: 9 } }`, []int64{1, 2, 3, 7}, nil},
		{`version_policy { all { } }`, []int64{1, 2, 3, 7}, nil},
		{`version_policy { specific { versions: [ 2, 1 ] } }`, []int64{1, 2}, nil},
		{`version_policy { specific { versions: [ 4 ] } }`, nil, modelconfig.ErrInvalid},
	}
	for _, tc := range tests {
		cfg, _, err := modelconfig.Parse([]byte(tc.policy))
		if err != nil {
			t.Fatal(err)
		}
		got, err := modelconfig.Versions(cfg, disk)
		if !slices.Equal(got, tc.want) || !errors.Is(err, tc.err) {
			t.Errorf("%q: got %v, %v; want %v, %v", tc.policy, got, err, tc.want, tc.err)
		}
	}
	if got, err := modelconfig.Versions(nil, nil); len(got) != 0 || err != nil {
		t.Errorf("nil config, no versions: got %v, %v", got, err)
	}
}
