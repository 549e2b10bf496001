package modelconfig_test

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/infer/modelconfig"
)

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
		{`version_policy { specific { versions: [ 4 ] } }`, nil, modelconfig.ErrVersion},
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
