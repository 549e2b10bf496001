package modelconfig

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// Settings is what the engine takes from a model's config.
type Settings struct {
	// MaxBatch is max_batch_size; 0: the model does not batch (its
	// inputs and outputs have no batch dim).
	MaxBatch int
	// Dynamic is whether `dynamic_batching {}` is present: records of
	// concurrent requests are batched together.
	Dynamic bool
	// Preferred is dynamic_batching.preferred_batch_size.
	Preferred []int
	// MaxQueueDelay is dynamic_batching.max_queue_delay_microseconds.
	MaxQueueDelay time.Duration
	// Instances is the sum of instance_group[].count, a group without a
	// count counting Triton's default for ONNX Runtime (2 for KIND_CPU,
	// else 1); 0: no instance_group.
	Instances int
	// ExecutionProvider is infer's executionProvider (see
	// infer.Providers): "" (the engine's default) or the execution
	// accelerator optimization.execution_accelerators names for the
	// instances' kind (gpu: tensorrt or cuda; cpu: openvino), else "cuda"
	// for KIND_GPU instances and "cpu" for KIND_CPU ones. Without an
	// instance kind, a gpu accelerator, else a cpu one, else "".
	ExecutionProvider string
	// Reshape maps an input or output name to the shape the graph takes
	// or gives (reshape.shape), for the names that have a reshape.
	Reshape map[string][]int64
	// Dims maps the same names to their declared dims: what clients send
	// and receive. EngineReshape joins the two for infer.Config.Reshape.
	Dims map[string][]int64
	// Parameters is parameters{key: {string_value}}.
	Parameters map[string]string
	// Threads is parameters{key: "intra_op_thread_count"} (ONNX Runtime
	// backend's name): intra-op threads per session (threadPerModel);
	// 0: not set. The backend's other parameters show in the config and
	// have no effect.
	Threads int
}

// ParamThreads is the parameter Settings.Threads reads.
const ParamThreads = "intra_op_thread_count"

// threads reads ParamThreads of cfg: 0 when it is not set, an error when
// it is not a positive integer.
func threads(cfg *kservepb.ModelConfig) (int, error) {
	p, ok := cfg.GetParameters()[ParamThreads]
	if !ok {
		return 0, nil
	}
	n, err := strconv.Atoi(p.GetStringValue())
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%w: parameters %s: got %q, want a positive integer", ErrInvalid, ParamThreads, p.GetStringValue())
	}
	return n, nil
}

// SettingsOf returns cfg's settings (see Settings); nil cfg gives the zero
// Settings.
func SettingsOf(cfg *kservepb.ModelConfig) Settings {
	var s Settings
	if cfg == nil {
		return s
	}
	s.MaxBatch = int(cfg.MaxBatchSize)
	if db := cfg.GetDynamicBatching(); db != nil {
		s.Dynamic = true
		for _, p := range db.PreferredBatchSize {
			s.Preferred = append(s.Preferred, int(p))
		}
		s.MaxQueueDelay = time.Duration(min(db.MaxQueueDelayMicroseconds, uint64(time.Duration(1<<63-1)/time.Microsecond))) * time.Microsecond
	}
	for _, g := range cfg.InstanceGroup {
		s.Instances += instanceCount(g)
	}
	s.ExecutionProvider = executionProvider(cfg)
	for _, in := range cfg.Input {
		s.addReshape(in.Name, in.Dims, in.Reshape)
	}
	for _, out := range cfg.Output {
		s.addReshape(out.Name, out.Dims, out.Reshape)
	}
	for k, p := range cfg.Parameters {
		if s.Parameters == nil {
			s.Parameters = map[string]string{}
		}
		s.Parameters[k] = p.GetStringValue()
	}
	s.Threads, _ = threads(cfg) // Check reports a bad value
	return s
}

func (s *Settings) addReshape(name string, dims []int64, r *kservepb.ModelTensorReshape) {
	if r == nil {
		return
	}
	if s.Reshape == nil {
		s.Reshape, s.Dims = map[string][]int64{}, map[string][]int64{}
	}
	s.Reshape[name] = append([]int64{}, r.Shape...)
	s.Dims[name] = append([]int64{}, dims...)
}

// EngineReshape is s's reshapes as infer.Config.Reshape takes them; nil
// when there are none.
func (s Settings) EngineReshape() map[string]infer.Reshape {
	if len(s.Reshape) == 0 {
		return nil
	}
	out := make(map[string]infer.Reshape, len(s.Reshape))
	for name, shape := range s.Reshape {
		out[name] = infer.Reshape{Dims: slices.Clone(s.Dims[name]), Shape: slices.Clone(shape)}
	}
	return out
}

// executionProvider picks infer's executionProvider for cfg (see
// Settings.ExecutionProvider), as Triton's ONNX Runtime backend picks the
// execution providers of an instance: gpu accelerators for GPU (and AUTO)
// instances, cpu accelerators for every instance. Names infer does not
// know are left out (Check reports them).
func executionProvider(cfg *kservepb.ModelConfig) string {
	ea := cfg.GetOptimization().GetExecutionAccelerators()
	gpu := firstKnown(ea.GetGpuExecutionAccelerator(), gpuAccelerators)
	cpu := firstKnown(ea.GetCpuExecutionAccelerator(), cpuAccelerators)
	switch instanceKind(cfg.InstanceGroup) {
	case kservepb.ModelInstanceGroup_KIND_GPU:
		return cmp.Or(gpu, infer.ProviderCUDA)
	case kservepb.ModelInstanceGroup_KIND_CPU:
		return cmp.Or(cpu, infer.ProviderCPU)
	}
	return cmp.Or(gpu, cpu)
}

// instanceKind is KIND_GPU when a group runs on GPUs, else KIND_CPU when
// one runs on the CPU, else KIND_AUTO.
func instanceKind(groups []*kservepb.ModelInstanceGroup) kservepb.ModelInstanceGroup_Kind {
	kind := kservepb.ModelInstanceGroup_KIND_AUTO
	for _, g := range groups {
		switch g.Kind {
		case kservepb.ModelInstanceGroup_KIND_GPU:
			return g.Kind
		case kservepb.ModelInstanceGroup_KIND_CPU:
			kind = g.Kind
		}
	}
	return kind
}

func firstKnown(as []*kservepb.ModelOptimizationPolicy_ExecutionAccelerators_Accelerator, known []string) string {
	for _, a := range as {
		if slices.Contains(known, a.Name) {
			return a.Name
		}
	}
	return ""
}
