package modelconfig_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/modelconfig"
)

// TestWarmups reads model_warmup as Triton writes it into the samples
// the engine runs.
func TestWarmups(t *testing.T) {
	const pbtxt = `max_batch_size: 8
model_warmup [
  { name: "zeros" batch_size: 2 count: 3
    inputs { key: "x" value: { data_type: TYPE_FP32 dims: [4] zero_data: true } } },
  { name: "skipped" batch_size: 0
    inputs { key: "x" value: { data_type: TYPE_FP32 dims: [4] zero_data: true } } },
  { name: "mixed" batch_size: 1
    inputs { key: "b" value: { data_type: TYPE_STRING dims: [2] input_data_file: "b.str" } }
    inputs { key: "a" value: { data_type: TYPE_INT64 dims: [3] random_data: true } } }
]`
	cfg, _, err := modelconfig.Parse([]byte(pbtxt))
	if err != nil {
		t.Fatal(err)
	}
	got, err := modelconfig.Warmups(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := []infer.WarmupSample{
		{Name: "zeros", Rows: 2, Count: 3, Inputs: []infer.WarmupInput{{Name: "x", DType: infer.Float32, Dims: []int64{4}, Source: infer.WarmupZero}}},
		{Name: "mixed", Rows: 1, Inputs: []infer.WarmupInput{
			{Name: "a", DType: infer.Int64, Dims: []int64{3}, Source: infer.WarmupRandom},
			{Name: "b", DType: infer.String, Dims: []int64{2}, Source: infer.WarmupFile, File: "b.str"},
		}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if got, err := modelconfig.Warmups(nil); got != nil || err != nil {
		t.Errorf("nil config: got %v, %v; want none", got, err)
	}
}

func TestWarmupsNoBatch(t *testing.T) {
	for _, bs := range []string{"0", "1"} {
		cfg, _, err := modelconfig.Parse([]byte(`max_batch_size: 0 model_warmup { name: "w" batch_size: ` + bs +
			` inputs { key: "x" value: { data_type: TYPE_FP32 dims: [2, 4] zero_data: true } } }`))
		if err != nil {
			t.Fatal(err)
		}
		got, err := modelconfig.Warmups(cfg)
		if err != nil || len(got) != 1 || got[0].Rows != 0 {
			t.Errorf("batch_size %s: got %+v, %v; want one sample without a batch dim", bs, got, err)
		}
	}
}

func TestWarmupsInvalid(t *testing.T) {
	for _, tc := range []struct{ pbtxt, want string }{
		{`max_batch_size: 4 model_warmup { name: "w" batch_size: 5 inputs { key: "x" value: { data_type: TYPE_FP32 dims: [4] zero_data: true } } }`,
			`model_warmup "w": batch_size 5 exceeds max_batch_size 4`},
		{`max_batch_size: 0 model_warmup { name: "w" batch_size: 2 inputs { key: "x" value: { data_type: TYPE_FP32 dims: [4] zero_data: true } } }`,
			`model_warmup "w": batch_size 2: a model with max_batch_size 0 does not batch, want 1`},
		{`max_batch_size: 4 model_warmup { name: "w" batch_size: 1 inputs { key: "x" value: { data_type: TYPE_FP32 dims: [4] } } }`,
			`model_warmup "w": input "x": set one of zero_data, random_data or input_data_file`},
		{`max_batch_size: 4 model_warmup { name: "w" batch_size: 1 inputs { key: "x" value: { data_type: TYPE_INVALID dims: [4] zero_data: true } } }`,
			`model_warmup "w": input "x": data_type TYPE_INVALID: not one the engine runs`},
	} {
		cfg, _, err := modelconfig.Parse([]byte(tc.pbtxt))
		if err != nil {
			t.Fatal(err)
		}
		_, err = modelconfig.Warmups(cfg)
		if !errors.Is(err, modelconfig.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want ErrInvalid holding %q", err, tc.want)
		}
	}
}
