package modelconfig

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// Check reports the first way a completed cfg (see Complete) disagrees
// with the model's graph, in the order Triton's ONNX Runtime backend
// checks, naming the field, the config's value and the graph's:
//   - platform or backend other than ONNX Runtime's (ErrPlatform, with how
//     to export the model to ONNX);
//   - max_batch_size below 0, or above 0 on a graph where dim 0 of some
//     input or output is not dynamic;
//   - a number of inputs other than the graph's; an input or output name
//     the graph lacks; a data_type other than the graph's; dims (after
//     the batch dim when max_batch_size > 0; reshape.shape where there is a
//     reshape) of another rank than the graph's, or a dim that differs
//     (-1 on either side matches anything);
//   - a reshape whose shape holds a different number of elements than dims;
//   - a dynamic_batching preferred_batch_size above max_batch_size;
//   - an execution accelerator ONNX Runtime's backend does not know.
//
// info is the graph as ONNX Runtime reads it (infer.Session.Info), or an
// engine's that applies the reshapes already (infer.Engine.Info, where a
// reshaped tensor has its declared dims): a reshaped tensor matches when
// either its reshape.shape or its dims fit. Errors wrap ErrPlatform,
// ErrMismatch or ErrInvalid; nil cfg is no error.
func Check(cfg *kservepb.ModelConfig, info infer.ModelInfo) error {
	if cfg == nil {
		return nil
	}
	if err := CheckPlatform(cfg); err != nil {
		return err
	}
	if _, err := threads(cfg); err != nil {
		return err
	}
	if err := QueueOf(cfg).Check(MaxPriorityLevels); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	mbs := cfg.MaxBatchSize
	switch why := batchBlocker(info); {
	case mbs < 0:
		return fmt.Errorf("%w: max_batch_size: got %d, want >= 0", ErrInvalid, mbs)
	case mbs > 0 && why != "":
		return fmt.Errorf("%w: max_batch_size %d: autofill failed for model '%s': model does not support batching while non-zero max_batch_size is specified (%s); set max_batch_size: 0",
			ErrMismatch, mbs, cfg.Name, why)
	}
	if len(cfg.Input) != len(info.Inputs) {
		return fmt.Errorf("%w: input: configuration expects %d inputs, model provides %d (%s)",
			ErrMismatch, len(cfg.Input), len(info.Inputs), strings.Join(info.InputNames(), ", "))
	}
	for i, in := range cfg.Input {
		if err := checkTensor(cfg, fmt.Sprintf("input[%d]", i), "input", in.Name, in.DataType, in.Dims, in.Reshape, info.Inputs); err != nil {
			return err
		}
	}
	for i, out := range cfg.Output {
		if err := checkTensor(cfg, fmt.Sprintf("output[%d]", i), "output", out.Name, out.DataType, out.Dims, out.Reshape, info.Outputs); err != nil {
			return err
		}
	}
	if err := checkBatching(cfg); err != nil {
		return err
	}
	return checkAccelerators(cfg)
}

// checkTensor checks one input or output (kind) of cfg, field its place
// in cfg, against the graph's ios.
func checkTensor(cfg *kservepb.ModelConfig, field, kind, name string, dt kservepb.DataType, dims []int64, reshape *kservepb.ModelTensorReshape, ios []infer.IO) error {
	i := slices.IndexFunc(ios, func(io infer.IO) bool { return io.Name == name })
	if i < 0 {
		names := ioNames(ios)
		slices.Sort(names)
		return fmt.Errorf("%w: %s: unexpected inference %s '%s', allowed %ss are: %s", ErrMismatch, field, kind, name, kind, strings.Join(names, ", "))
	}
	io := ios[i]
	if want := DataType(io.DType); dt != want {
		return fmt.Errorf("%w: %s.data_type: configuration expects datatype %s for %s '%s', model provides %s", ErrMismatch, field, dt, kind, name, want)
	}
	at := tensorAt{model: cfg.Name, tensor: name, graph: io.Shape, mbs: cfg.MaxBatchSize}
	if reshape == nil {
		return at.compare(field+".dims", dims)
	}
	if err := compareReshape(field, dims, reshape.Shape); err != nil {
		return err
	}
	err := at.compare(field+".reshape.shape", reshape.Shape)
	if err != nil && at.compare(field+".dims", dims) == nil {
		return nil // info is an engine's, which shows the declared dims
	}
	return err
}

func ioNames(ios []infer.IO) []string {
	return infer.ModelInfo{Inputs: ios}.InputNames()
}

// tensorAt is one tensor of a model's graph, with the model's
// max_batch_size.
type tensorAt struct {
	model, tensor string
	graph         []int64
	mbs           int32
}

// compare is Triton's CompareDimsSupported on dims (field in the config),
// except that -1 in the config matches any dim of the graph (Triton asks
// outputs for an exact match).
func (t tensorAt) compare(field string, dims []int64) error {
	if len(t.graph) == 0 {
		for _, d := range dims {
			if d != 1 {
				return fmt.Errorf("%w: %s: model '%s', scalar tensor '%s' should only provide 1 in the model configuration when the model doesn't support batching; model configuration provided %s",
					ErrMismatch, field, t.model, t.tensor, shapeString(dims))
			}
		}
		return nil
	}
	full, batch := dims, ""
	if t.mbs > 0 {
		full = append([]int64{-1}, dims...)
		batch = "an initial batch dimension because max_batch_size > 0 followed by the explicit tensor shape, making complete "
	}
	ok := len(t.graph) == len(full)
	for i := 0; ok && i < len(full); i++ {
		ok = t.graph[i] < 0 || full[i] < 0 || t.graph[i] == full[i]
	}
	if ok {
		return nil
	}
	return fmt.Errorf("%w: %s: model '%s', tensor '%s': the model expects %d dimensions (shape %s) but the model configuration specifies %d dimensions (%sshape %s)",
		ErrMismatch, field, t.model, t.tensor, len(t.graph), shapeString(t.graph), len(full), batch, shapeString(full))
}

// compareReshape checks that dims and a reshape's shape hold as many
// elements, where both are known.
func compareReshape(field string, dims, shape []int64) error {
	if slices.Contains(dims, -1) || slices.Contains(shape, -1) {
		return nil
	}
	if nd, ns := infer.NumElems(dims), infer.NumElems(shape); nd != ns {
		return fmt.Errorf("%w: %s.reshape.shape: %s holds %d elements, dims %s hold %d", ErrMismatch, field, shapeString(shape), ns, shapeString(dims), nd)
	}
	return nil
}

// shapeString writes a shape as Triton does: [-1,16].
func shapeString(s []int64) string {
	return strings.ReplaceAll(fmt.Sprint(s), " ", ",")
}

// checkBatching checks dynamic_batching's preferred sizes against
// max_batch_size, as Triton's core does.
func checkBatching(cfg *kservepb.ModelConfig) error {
	db := cfg.GetDynamicBatching()
	if db == nil {
		return nil
	}
	for _, p := range db.PreferredBatchSize {
		if p < 1 || (cfg.MaxBatchSize > 0 && p > cfg.MaxBatchSize) {
			return fmt.Errorf("%w: dynamic_batching.preferred_batch_size: %d, want 1 to max_batch_size %d", ErrInvalid, p, cfg.MaxBatchSize)
		}
	}
	return nil
}

// Execution accelerators ONNX Runtime's backend knows, by where they run.
var (
	gpuAccelerators = []string{infer.ProviderTensorRT, infer.ProviderCUDA}
	cpuAccelerators = []string{infer.ProviderOpenVINO}
)

func checkAccelerators(cfg *kservepb.ModelConfig) error {
	ea := cfg.GetOptimization().GetExecutionAccelerators()
	for _, a := range ea.GetGpuExecutionAccelerator() {
		if !slices.Contains(gpuAccelerators, a.Name) {
			return fmt.Errorf("%w: optimization.execution_accelerators.gpu_execution_accelerator: unknown Execution Accelerator '%s', want one of %s", ErrInvalid, a.Name, strings.Join(gpuAccelerators, ", "))
		}
	}
	for _, a := range ea.GetCpuExecutionAccelerator() {
		if !slices.Contains(cpuAccelerators, a.Name) {
			return fmt.Errorf("%w: optimization.execution_accelerators.cpu_execution_accelerator: unknown Execution Accelerator '%s', want one of %s", ErrInvalid, a.Name, strings.Join(cpuAccelerators, ", "))
		}
	}
	return nil
}
