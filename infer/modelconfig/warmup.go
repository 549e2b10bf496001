package modelconfig

import (
	"fmt"
	"maps"
	"slices"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// Warmups returns the samples of cfg's model_warmup, in order, as
// infer.Engine.Warmup runs them; cfg is a completed config (see
// Complete), whose max_batch_size is the one in force. nil cfg, or one
// without model_warmup, has none. As in Triton:
//   - with max_batch_size N > 0, dims leave the batch dim out and the
//     sample runs batch_size rows (1 to N); a batch_size of 0 skips the
//     sample, as Triton does;
//   - with max_batch_size 0 there is no batch dim: batch_size is 1 (or
//     0, left unset) and dims are the whole shapes;
//   - count runs (0 means 1), on every session of the model.
//
// Errors wrap ErrInvalid and name the sample and input: a batch_size the
// max_batch_size does not allow, an input without zero_data, random_data
// or input_data_file, a data_type the engine has no element type for.
// What depends on the graph (an input the model lacks, another data
// type, the dims) is the engine's to check when the sample runs.
func Warmups(cfg *kservepb.ModelConfig) ([]infer.WarmupSample, error) {
	var out []infer.WarmupSample
	mbs := cfg.GetMaxBatchSize()
	for _, w := range cfg.GetModelWarmup() {
		bs := int(w.GetBatchSize())
		switch {
		case mbs > 0 && bs == 0:
			continue
		case mbs > 0 && bs > int(mbs):
			return nil, fmt.Errorf("%w: model_warmup %q: batch_size %d exceeds max_batch_size %d", ErrInvalid, w.GetName(), bs, mbs)
		case mbs == 0 && bs > 1:
			return nil, fmt.Errorf("%w: model_warmup %q: batch_size %d: a model with max_batch_size 0 does not batch, want 1", ErrInvalid, w.GetName(), bs)
		case mbs == 0:
			bs = 0 // no batch dim
		}
		s := infer.WarmupSample{Name: w.GetName(), Rows: bs, Count: int(w.GetCount())}
		for _, name := range slices.Sorted(maps.Keys(w.GetInputs())) {
			in, err := warmupInput(name, w.GetInputs()[name])
			if err != nil {
				return nil, fmt.Errorf("%w: model_warmup %q: input %q: %w", ErrInvalid, w.GetName(), name, err)
			}
			s.Inputs = append(s.Inputs, in)
		}
		out = append(out, s)
	}
	return out, nil
}

// warmupInput is one model_warmup input as the engine takes it.
func warmupInput(name string, in *kservepb.ModelWarmup_Input) (infer.WarmupInput, error) {
	dt := in.GetDataType()
	out := infer.WarmupInput{Name: name, Dims: in.GetDims(), DType: dtypeOf(dt)}
	if out.DType == infer.Invalid {
		return out, fmt.Errorf("data_type %s: not one the engine runs", dt)
	}
	switch src := in.GetInputDataType().(type) {
	case *kservepb.ModelWarmup_Input_ZeroData:
		out.Source = infer.WarmupZero
	case *kservepb.ModelWarmup_Input_RandomData:
		out.Source = infer.WarmupRandom
	case *kservepb.ModelWarmup_Input_InputDataFile:
		out.Source, out.File = infer.WarmupFile, src.InputDataFile
	default:
		return out, fmt.Errorf("set one of zero_data, random_data or input_data_file")
	}
	return out, nil
}

// dtypeOf is the element type of Triton's data type dt; infer.Invalid
// for none.
func dtypeOf(dt kservepb.DataType) infer.DType {
	for d, t := range dataTypes {
		if t == dt {
			return d
		}
	}
	return infer.Invalid
}
