package kservepb

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestJSONNumbers checks the 64-bit fields Triton's clients read as
// numbers (dims, batch sizes, counts) come out as numbers, at every
// depth (lists, nested messages, maps), and zero fields are written.
func TestJSONNumbers(t *testing.T) {
	cfg := &ModelConfig{
		Name:         "m",
		MaxBatchSize: 8,
		Input:        []*ModelInput{{Name: "x", DataType: DataType_TYPE_FP32, Dims: []int64{-1, 3}}},
		SchedulingChoice: &ModelConfig_DynamicBatching{DynamicBatching: &ModelDynamicBatching{
			PreferredBatchSize: []int32{4}, MaxQueueDelayMicroseconds: 2000,
		}},
		Parameters: map[string]*ModelParameter{"k": {StringValue: "123"}},
	}
	b, err := JSON(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		MaxBatchSize int `json:"max_batch_size"`
		Input        []struct {
			DataType string  `json:"data_type"`
			Dims     []int64 `json:"dims"`
		} `json:"input"`
		DynamicBatching struct {
			Delay uint64 `json:"max_queue_delay_microseconds"`
		} `json:"dynamic_batching"`
		Parameters map[string]struct {
			StringValue string `json:"string_value"`
		} `json:"parameters"`
		Platform *string `json:"platform"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
	if v.MaxBatchSize != 8 || len(v.Input) != 1 || v.Input[0].Dims[0] != -1 || v.Input[0].Dims[1] != 3 ||
		v.Input[0].DataType != "TYPE_FP32" || v.DynamicBatching.Delay != 2000 || v.Parameters["k"].StringValue != "123" {
		t.Errorf("JSON = %s", b)
	}
	if v.Platform == nil {
		t.Errorf("platform (zero) left out of %s; Triton writes every field", b)
	}
	if bytes.Contains(b, []byte("null")) {
		t.Errorf("an unset message written as null in %s; Triton leaves it out", b)
	}

	st := &ModelStatisticsResponse{ModelStats: []*ModelStatistics{{
		Name: "m", InferenceCount: 5,
		InferenceStats: &InferStatistics{Success: &StatisticDuration{Count: 2, Ns: 1 << 40}},
		BatchStats:     []*InferBatchStatistics{{BatchSize: 3, ComputeInfer: &StatisticDuration{Count: 1, Ns: 7}}},
	}}}
	b, err = JSON(st)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		ModelStats []struct {
			InferenceCount uint64 `json:"inference_count"`
			InferenceStats struct {
				Success struct{ Count, Ns uint64 } `json:"success"`
			} `json:"inference_stats"`
			BatchStats []struct {
				BatchSize    uint64                     `json:"batch_size"`
				ComputeInfer struct{ Count, Ns uint64 } `json:"compute_infer"`
			} `json:"batch_stats"`
		} `json:"model_stats"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
	m := s.ModelStats[0]
	if m.InferenceCount != 5 || m.InferenceStats.Success.Ns != 1<<40 || m.BatchStats[0].BatchSize != 3 || m.BatchStats[0].ComputeInfer.Ns != 7 {
		t.Errorf("JSON = %s", b)
	}
}
