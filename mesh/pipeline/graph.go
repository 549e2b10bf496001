package pipeline

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/modelconfig"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// ErrEnsemble is wrapped by every error of an ensemble's configuration:
// the ensemble does not serve, and the repository index says why.
var ErrEnsemble = errors.New("ensemble")

// Member is what an ensemble knows of a composing model: the version
// that serves the step, the job whose workers serve it and its completed
// configuration (inputs, outputs, max_batch_size).
type Member struct {
	Name, Version string
	Job           string
	Config        *kservepb.ModelConfig
}

// Resolve finds composing model name at version (-1: the latest that
// serves). Its error says why the model cannot serve the step (unknown,
// not loaded, that version not served); Build wraps it.
type Resolve func(name string, version int64) (Member, error)

// binding ties a composing model's input or output to an ensemble
// tensor.
type binding struct {
	model, tensor string
}

// step is one step of a Graph: its model, its inputs in the model's
// input order and its outputs, each bound to an ensemble tensor.
type step struct {
	index   int
	member  Member
	inputs  []binding
	outputs []binding
	batched bool // the composing model has a batch dim (max_batch_size > 0)
}

// spec is one ensemble tensor's dtype and dims as declared by the
// ensemble or inferred from a composing model, in the ensemble's frame:
// without the batch dim when the ensemble batches, with it otherwise.
type spec struct {
	dtype kservepb.DataType
	dims  []int64
	from  string // "ensemble X" or "model Y", for errors
}

// Graph is a checked ensemble: its steps in an order where each step
// comes after the steps it needs, and which tensor each step produces.
type Graph struct {
	name     string
	maxBatch int32
	info     infer.ModelInfo
	steps    []*step
	producer map[string]int // ensemble tensor -> step index; ensemble inputs are absent
	inflight int            // max_inflight_requests; 0: no bound
}

// IsEnsemble reports whether cfg configures an ensemble.
func IsEnsemble(cfg *kservepb.ModelConfig) bool {
	return cfg != nil && (cfg.Platform == "ensemble" || cfg.GetEnsembleScheduling() != nil)
}

// Steps returns the composing models of an ensemble config by name, in
// step order, once each (Build is not needed: a repository orders its
// loads with it).
func Steps(cfg *kservepb.ModelConfig) []string {
	var out []string
	for _, s := range cfg.GetEnsembleScheduling().GetStep() {
		if !slices.Contains(out, s.ModelName) {
			out = append(out, s.ModelName)
		}
	}
	return out
}

// Build checks ensemble cfg (named name) against its composing models,
// which resolve finds, and returns its Graph. Every error wraps
// ErrEnsemble and names the ensemble, the step and the tensor at fault,
// in the words of Triton's own checks where it has them.
func Build(name string, cfg *kservepb.ModelConfig, resolve Resolve) (*Graph, error) {
	if err := checkSettings(name, cfg); err != nil {
		return nil, err
	}
	g := &Graph{name: name, maxBatch: cfg.MaxBatchSize, producer: map[string]int{}, inflight: int(cfg.GetEnsembleScheduling().GetMaxInflightRequests())}
	specs := map[string][]spec{} // what each tensor is said to be, by whom
	for _, in := range cfg.Input {
		if len(specs[in.Name]) > 0 {
			return nil, g.errorf("input %q is declared twice", in.Name)
		}
		specs[in.Name] = []spec{{in.DataType, in.Dims, "ensemble " + name}}
	}
	for i, s := range cfg.GetEnsembleScheduling().GetStep() {
		st, err := g.step(i, s, resolve, specs)
		if err != nil {
			return nil, err
		}
		g.steps = append(g.steps, st)
	}
	if err := g.checkTensors(cfg, specs); err != nil {
		return nil, err
	}
	if err := g.order(); err != nil {
		return nil, err
	}
	g.info = ensembleInfo(name, cfg)
	return g, nil
}

// Name is the ensemble's name.
func (g *Graph) Name() string { return g.name }

// Info describes the ensemble's inputs and outputs as its config declares
// them (a batch dim of -1 first when max_batch_size > 0). It does not
// batch itself (DynamicBatch false): an OIP request runs whole, and each
// step batches in its own model's queue.
func (g *Graph) Info() infer.ModelInfo { return g.info }

// Members lists the composing models of the steps, in step order.
func (g *Graph) Members() []Member {
	out := make([]Member, len(g.steps))
	for i, s := range g.steps {
		out[i] = s.member
	}
	return out
}

func (g *Graph) errorf(format string, args ...any) error {
	return fmt.Errorf("%w %q: %s", ErrEnsemble, g.name, fmt.Sprintf(format, args...))
}

// checkSettings refuses what an ensemble cannot have (Triton's messages).
func checkSettings(name string, cfg *kservepb.ModelConfig) error {
	bad := func(format string) error { return fmt.Errorf("%w %q: "+format, ErrEnsemble, name, name) }
	switch {
	case cfg.Platform != "ensemble":
		return bad("ensemble_scheduling is set for model '%s' whose platform is not ensemble: set platform: \"ensemble\"")
	case len(cfg.GetEnsembleScheduling().GetStep()) == 0:
		return bad("must specify one or more 'step's for ensemble '%s'")
	case len(cfg.InstanceGroup) > 0:
		return bad("instance group should not be specified for ensemble '%s'")
	case cfg.GetDynamicBatching() != nil:
		return bad("dynamic batching should not be specified for ensemble '%s': each step batches in its own model's queue")
	case cfg.GetSequenceBatching() != nil:
		return bad("sequence batching should not be specified for ensemble '%s'")
	case len(cfg.ModelWarmup) > 0:
		return bad("model_warmup can not be specified for ensemble '%s': warm its composing models up instead")
	case len(cfg.Input) == 0 || len(cfg.Output) == 0:
		return bad("ensemble '%s' must declare its input and output tensors")
	case cfg.MaxBatchSize < 0:
		return bad("ensemble '%s': max_batch_size must be 0 or more")
	}
	return nil
}

// step checks step i of the ensemble and records what it says of each
// tensor in specs.
func (g *Graph) step(i int, s *kservepb.ModelEnsembling_Step, resolve Resolve, specs map[string][]spec) (*step, error) {
	switch {
	case s.ModelName == "":
		return nil, g.errorf("must specify 'model_name' in step %d", i)
	case len(s.InputMap) == 0:
		return nil, g.errorf("must specify 'input_map' in step %d (model %q)", i, s.ModelName)
	case len(s.OutputMap) == 0:
		return nil, g.errorf("must specify 'output_map' in step %d (model %q)", i, s.ModelName)
	case s.ModelVersion < -1:
		return nil, g.errorf("step %d: model_version %d of model %q: want -1 (the latest) or a version number", i, s.ModelVersion, s.ModelName)
	}
	version := s.ModelVersion
	if version == 0 {
		version = -1 // unset: the latest, as -1
	}
	m, err := resolve(s.ModelName, version)
	if err != nil {
		return nil, g.errorf("step %d: ensemble '%s' depends on '%s' which is not available: %v", i, g.name, s.ModelName, err)
	}
	mb := m.Config.GetMaxBatchSize()
	if g.maxBatch > mb {
		return nil, g.errorf("ensemble '%s' allows maximum batch size %d, but it contains model '%s' which only allows maximum batch size to be %d",
			g.name, g.maxBatch, m.Name, mb)
	}
	st := &step{index: i, member: m, batched: mb > 0}
	from := "model " + m.Name
	for _, in := range m.Config.Input {
		tensor, ok := s.InputMap[in.Name]
		if !ok {
			return nil, g.errorf("step %d: input '%s' of model '%s' is not mapped: add it to input_map", i, in.Name, m.Name)
		}
		st.inputs = append(st.inputs, binding{in.Name, tensor})
		specs[tensor] = append(specs[tensor], spec{in.DataType, g.frame(in.Dims, mb), from})
	}
	for k := range s.InputMap {
		if !slices.ContainsFunc(st.inputs, func(b binding) bool { return b.model == k }) {
			return nil, g.errorf("step %d: in ensemble '%s', input_map maps '%s', which is not an input of model '%s' (its inputs: %s)",
				i, g.name, k, m.Name, ioNames(m.Config.Input))
		}
	}
	for _, k := range sortedKeys(s.OutputMap) {
		tensor := s.OutputMap[k]
		out := findOutput(m.Config, k)
		if out == nil {
			return nil, g.errorf("step %d: in ensemble '%s', output_map maps '%s', which is not an output of model '%s' (its outputs: %s)",
				i, g.name, k, m.Name, outputNames(m.Config.Output))
		}
		if p, dup := g.producer[tensor]; dup || slices.ContainsFunc(specs[tensor], func(s spec) bool { return s.from == "ensemble "+g.name }) {
			by := "it is an input of the ensemble"
			if dup {
				by = "step " + strconv.Itoa(p) + " produces it already"
			}
			return nil, g.errorf("ensemble tensor '%s' can appear in an output map only once for ensemble '%s' step %d (%s)", tensor, g.name, i, by)
		}
		g.producer[tensor] = i
		st.outputs = append(st.outputs, binding{k, tensor})
		specs[tensor] = append([]spec{{out.DataType, g.frame(out.Dims, mb), from}}, specs[tensor]...)
	}
	return st, nil
}

// frame is a composing model's dims in the ensemble's frame: a model that
// batches under an ensemble that does not sees the batch dim as part of
// the tensor.
func (g *Graph) frame(dims []int64, modelMaxBatch int32) []int64 {
	if g.maxBatch == 0 && modelMaxBatch > 0 {
		return append([]int64{-1}, dims...)
	}
	return dims
}

// checkTensors checks every ensemble tensor: produced (by an ensemble
// input or a step), used, and of one dtype and compatible dims wherever
// it appears; every ensemble output is produced.
func (g *Graph) checkTensors(cfg *kservepb.ModelConfig, specs map[string][]spec) error {
	for _, out := range cfg.Output {
		if _, ok := g.producer[out.Name]; !ok {
			return g.errorf("in ensemble '%s', no step produces ensemble output '%s': add it to a step's output_map", g.name, out.Name)
		}
		specs[out.Name] = append(specs[out.Name], spec{out.DataType, out.Dims, "ensemble " + g.name + " output"})
	}
	for _, in := range cfg.Input {
		if len(specs[in.Name]) < 2 {
			return g.errorf("ensemble input '%s' for ensemble '%s' is not used by any step", in.Name, g.name)
		}
	}
	for _, tensor := range sortedKeys(specs) {
		ss := specs[tensor]
		_, produced := g.producer[tensor]
		if !produced && ss[0].from != "ensemble "+g.name {
			return g.errorf("in ensemble '%s', ensemble tensor '%s' is an input of %s but no step produces it and the ensemble has no such input",
				g.name, tensor, ss[0].from)
		}
		for _, s := range ss[1:] {
			if s.dtype != ss[0].dtype {
				return g.errorf("in ensemble '%s', ensemble tensor '%s': inconsistent data type: %s is inferred from %s while %s is inferred from %s",
					g.name, tensor, ss[0].dtype, ss[0].from, s.dtype, s.from)
			}
			if !compatible(ss[0].dims, s.dims) {
				return g.errorf("in ensemble '%s', ensemble tensor '%s': inconsistent shape: %v is inferred from %s while %v is inferred from %s",
					g.name, tensor, ss[0].dims, ss[0].from, s.dims, s.from)
			}
		}
	}
	return nil
}

// order sorts the steps so that each comes after the steps producing
// its inputs; a cycle is an error naming its steps.
func (g *Graph) order() error {
	done := map[int]bool{}
	var sorted []*step
	for len(sorted) < len(g.steps) {
		progress := false
		for _, s := range g.steps {
			if done[s.index] || !g.ready(s, done) {
				continue
			}
			done[s.index], progress = true, true
			sorted = append(sorted, s)
		}
		if !progress {
			var stuck []string
			for _, s := range g.steps {
				if !done[s.index] {
					stuck = append(stuck, fmt.Sprintf("step %d (%s)", s.index, s.member.Name))
				}
			}
			return g.errorf("circular dependency between the steps of ensemble '%s': %v each wait for another's output", g.name, stuck)
		}
	}
	g.steps = sorted
	return nil
}

// ready reports whether every input of s is an ensemble input or the
// output of a step in done.
func (g *Graph) ready(s *step, done map[int]bool) bool {
	for _, in := range s.inputs {
		if p, ok := g.producer[in.tensor]; ok && !done[p] {
			return false
		}
	}
	return true
}

// compatible reports whether two dims lists can describe one tensor: the
// same rank, each dim equal or -1 on either side.
func compatible(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] && a[i] != -1 && b[i] != -1 {
			return false
		}
	}
	return true
}

// ensembleInfo is the ModelInfo of the ensemble's declared tensors.
func ensembleInfo(name string, cfg *kservepb.ModelConfig) infer.ModelInfo {
	io := func(name string, dt kservepb.DataType, dims []int64) infer.IO {
		shape := slices.Clone(dims)
		if cfg.MaxBatchSize > 0 {
			shape = append([]int64{-1}, shape...)
		}
		return infer.IO{Name: name, DType: dtypeOf(dt), Shape: shape}
	}
	info := infer.ModelInfo{Name: name, BatchReason: "ensemble: each step batches in its own model's work queue"}
	for _, in := range cfg.Input {
		info.Inputs = append(info.Inputs, io(in.Name, in.DataType, in.Dims))
	}
	for _, out := range cfg.Output {
		info.Outputs = append(info.Outputs, io(out.Name, out.DataType, out.Dims))
	}
	return info
}

// dtypeOf is the infer dtype of a config data type; infer.Invalid for
// one infer has none for.
func dtypeOf(dt kservepb.DataType) infer.DType {
	for d := infer.Float32; d <= infer.String; d++ {
		if modelconfig.DataType(d) == dt {
			return d
		}
	}
	return infer.Invalid
}

func findOutput(cfg *kservepb.ModelConfig, name string) *kservepb.ModelOutput {
	for _, o := range cfg.Output {
		if o.Name == name {
			return o
		}
	}
	return nil
}

func ioNames(ins []*kservepb.ModelInput) []string {
	out := make([]string, len(ins))
	for i, in := range ins {
		out[i] = in.Name
	}
	return out
}

func outputNames(outs []*kservepb.ModelOutput) []string {
	out := make([]string, len(outs))
	for i, o := range outs {
		out[i] = o.Name
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
