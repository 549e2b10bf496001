package modelconfig

import (
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// Triton's names for an ONNX model: the platform and the backend.
const (
	Platform = "onnxruntime_onnx"
	Backend  = "onnxruntime"
)

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
// filled from the model's graph, as Triton's auto-complete does: name,
// platform and backend, the inputs and outputs, and max_batch_size from
// whether records batch along dim 0 (info.DynamicBatch; maxBatch is the
// engine's batch size then). With max_batch_size > 0 the dims leave out
// the batch dimension, as Triton's do. cfg itself is not changed.
func Complete(cfg *kservepb.ModelConfig, name string, info infer.ModelInfo, maxBatch int) *kservepb.ModelConfig {
	out := &kservepb.ModelConfig{}
	if cfg != nil {
		out = cloneConfig(cfg)
	}
	if out.Name == "" {
		out.Name = name
	}
	if out.Platform == "" && out.Backend == "" {
		out.Platform, out.Backend = Platform, Backend
	}
	if cfg == nil && info.DynamicBatch {
		out.MaxBatchSize = int32(max(maxBatch, 1))
	}
	if len(out.Input) == 0 {
		for _, io := range info.Inputs {
			out.Input = append(out.Input, &kservepb.ModelInput{Name: io.Name, DataType: DataType(io.DType), Dims: dims(io.Shape, out.MaxBatchSize)})
		}
	}
	if len(out.Output) == 0 {
		for _, io := range info.Outputs {
			out.Output = append(out.Output, &kservepb.ModelOutput{Name: io.Name, DataType: DataType(io.DType), Dims: dims(io.Shape, out.MaxBatchSize)})
		}
	}
	if out.VersionPolicy == nil {
		out.VersionPolicy = &kservepb.ModelVersionPolicy{PolicyChoice: &kservepb.ModelVersionPolicy_Latest_{Latest: &kservepb.ModelVersionPolicy_Latest{NumVersions: 1}}}
	}
	return out
}

// dims is a graph shape as a config declares it: without the batch
// dimension when the model batches (maxBatch > 0), and [1] for a scalar
// (Triton's way to write a shape with no dims).
func dims(shape []int64, maxBatch int32) []int64 {
	if maxBatch > 0 && len(shape) > 0 {
		shape = shape[1:]
	}
	if len(shape) == 0 {
		return []int64{1}
	}
	return append([]int64(nil), shape...)
}
