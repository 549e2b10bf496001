package modelconfig

import (
	"fmt"
	"math"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// Triton's names for an ONNX model: the platform, the backend and the
// model file in a version directory.
const (
	Platform      = "onnxruntime_onnx"
	Backend       = "onnxruntime"
	ModelFilename = "model.onnx"
)

// DefaultMaxBatch is the max_batch_size auto-complete gives a graph that
// batches when the caller passes none: Triton's default-max-batch-size.
const DefaultMaxBatch = 4

// dataTypes are Triton's data types of infer's element types.
var dataTypes = map[infer.DType]kservepb.DataType{
	infer.Float32: kservepb.DataType_TYPE_FP32, infer.Float64: kservepb.DataType_TYPE_FP64,
	infer.Float16: kservepb.DataType_TYPE_FP16, infer.BFloat16: kservepb.DataType_TYPE_BF16,
	infer.Int8: kservepb.DataType_TYPE_INT8, infer.Int16: kservepb.DataType_TYPE_INT16,
	infer.Int32: kservepb.DataType_TYPE_INT32, infer.Int64: kservepb.DataType_TYPE_INT64,
	infer.Uint8: kservepb.DataType_TYPE_UINT8, infer.Uint16: kservepb.DataType_TYPE_UINT16,
	infer.Uint32: kservepb.DataType_TYPE_UINT32, infer.Uint64: kservepb.DataType_TYPE_UINT64,
	infer.Bool: kservepb.DataType_TYPE_BOOL, infer.String: kservepb.DataType_TYPE_STRING,
}

// DataType is Triton's data type of d (TYPE_INVALID for none).
func DataType(d infer.DType) kservepb.DataType { return dataTypes[d] }

// Complete returns cfg (a new config when nil) with what it leaves out
// filled from the model's graph info, as Triton's auto-complete for ONNX
// Runtime does (onnxruntime_backend's AutoCompleteConfig, then the core's
// normalisation); cfg itself is not changed:
//   - name (from name), platform and backend, default_model_filename;
//   - unless the config lists both inputs and outputs: max_batch_size,
//     when it is 0 and dim 0 of every graph input and output is dynamic,
//     becomes maxBatch (DefaultMaxBatch when maxBatch <= 0), with
//     `dynamic_batching {}` when that is above 1 and no scheduler is set;
//     the missing inputs or outputs come from the graph, their dims
//     without the batch dim when max_batch_size > 0 (a scalar is dims [1]);
//   - version_policy latest 1, dynamic_batching's preferred_batch_size
//     [max_batch_size], pinned input and output memory;
//   - each instance_group's name and count (KIND_CPU 2, else 1).
//
// Unlike Triton it adds no instance_group where there is none (the
// engine's own parallelism applies). As in Triton, max_batch_size 0 reads
// as "not set": a config that wants no batching on a graph that batches
// lists its inputs and outputs. Complete does not check: a max_batch_size
// the graph cannot take stays for Check to report.
func Complete(cfg *kservepb.ModelConfig, name string, info infer.ModelInfo, maxBatch int) *kservepb.ModelConfig {
	out := &kservepb.ModelConfig{}
	if cfg != nil {
		out = cloneConfig(cfg)
	}
	if out.Name == "" {
		out.Name = name
	}
	completePlatform(out)
	ins, outs := len(out.Input)+len(out.BatchInput), len(out.Output)
	if ins == 0 || outs == 0 {
		completeMaxBatch(out, info, maxBatch)
		if ins == 0 {
			for _, io := range info.Inputs {
				d, r := ioDims(io.Shape, out.MaxBatchSize)
				out.Input = append(out.Input, &kservepb.ModelInput{Name: io.Name, DataType: DataType(io.DType), Dims: d, Reshape: r})
			}
		}
		if outs == 0 {
			for _, io := range info.Outputs {
				d, r := ioDims(io.Shape, out.MaxBatchSize)
				out.Output = append(out.Output, &kservepb.ModelOutput{Name: io.Name, DataType: DataType(io.DType), Dims: d, Reshape: r})
			}
		}
	}
	normalize(out)
	return out
}

// completePlatform names ONNX Runtime as the platform and backend where
// the config names neither, or only one of the pair.
func completePlatform(c *kservepb.ModelConfig) {
	switch {
	case c.Platform == "" && (c.Backend == "" || c.Backend == Backend):
		c.Platform, c.Backend = Platform, Backend
	case c.Platform == Platform && c.Backend == "":
		c.Backend = Backend
	}
	if c.DefaultModelFilename == "" && c.Backend == Backend {
		c.DefaultModelFilename = ModelFilename
	}
}

// completeMaxBatch is onnxruntime_backend's AutoCompleteMaxBatch.
func completeMaxBatch(c *kservepb.ModelConfig, info infer.ModelInfo, maxBatch int) {
	if !batchable(info) {
		return
	}
	if c.MaxBatchSize == 0 {
		if maxBatch <= 0 {
			maxBatch = DefaultMaxBatch
		}
		c.MaxBatchSize = int32(min(maxBatch, math.MaxInt32))
	}
	if c.MaxBatchSize > 1 && c.SchedulingChoice == nil {
		c.SchedulingChoice = &kservepb.ModelConfig_DynamicBatching{DynamicBatching: &kservepb.ModelDynamicBatching{}}
	}
}

// batchable reports whether dim 0 of every input and output of info is
// dynamic, as Triton's AutoCompleteMaxBatch asks.
func batchable(info infer.ModelInfo) bool { return batchBlocker(info) == "" }

// batchBlocker says why records cannot stack along dim 0 of info's graph
// (infer's own reason), or "" when they can.
func batchBlocker(info infer.ModelInfo) string {
	b, err := infer.DecideBatching(info, infer.BatchingAuto)
	switch {
	case err != nil:
		return err.Error()
	case b.DynamicBatch:
		return ""
	}
	return b.BatchReason
}

// ioDims is a graph shape as auto-complete declares it: without the batch
// dim when maxBatch > 0; a shape with no dims left is dims [1], with an
// empty reshape when the model batches (Triton's AutoCompleteIO).
func ioDims(shape []int64, maxBatch int32) ([]int64, *kservepb.ModelTensorReshape) {
	if maxBatch > 0 && len(shape) > 0 {
		shape = shape[1:]
	}
	if len(shape) > 0 {
		return append([]int64(nil), shape...), nil
	}
	if maxBatch > 0 {
		return []int64{1}, &kservepb.ModelTensorReshape{}
	}
	return []int64{1}, nil
}

// normalize is what Triton's core fills in every config it loads.
func normalize(c *kservepb.ModelConfig) {
	if c.VersionPolicy == nil {
		c.VersionPolicy = &kservepb.ModelVersionPolicy{PolicyChoice: &kservepb.ModelVersionPolicy_Latest_{Latest: &kservepb.ModelVersionPolicy_Latest{NumVersions: 1}}}
	}
	if db := c.GetDynamicBatching(); db != nil && len(db.PreferredBatchSize) == 0 && c.MaxBatchSize > 0 {
		db.PreferredBatchSize = []int32{c.MaxBatchSize}
	}
	if c.GetEnsembleScheduling() == nil {
		if c.Optimization == nil {
			c.Optimization = &kservepb.ModelOptimizationPolicy{}
		}
		if c.Optimization.InputPinnedMemory == nil {
			c.Optimization.InputPinnedMemory = &kservepb.ModelOptimizationPolicy_PinnedMemoryBuffer{Enable: true}
		}
		if c.Optimization.OutputPinnedMemory == nil {
			c.Optimization.OutputPinnedMemory = &kservepb.ModelOptimizationPolicy_PinnedMemoryBuffer{Enable: true}
		}
	}
	for i, g := range c.InstanceGroup {
		if g.Name == "" {
			g.Name = fmt.Sprintf("%s_%d", c.Name, i)
		}
		g.Count = int32(instanceCount(g))
	}
}

// instanceCount is the number of instances g asks for: its count, or
// Triton's default for ONNX Runtime when it sets none (2 on the CPU, else 1).
func instanceCount(g *kservepb.ModelInstanceGroup) int {
	switch {
	case g.Count > 0:
		return int(g.Count)
	case g.Kind == kservepb.ModelInstanceGroup_KIND_CPU:
		return 2
	}
	return 1
}
