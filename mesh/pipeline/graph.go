package pipeline

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

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

// spec is what one party (the ensemble's declaration or a composing
// model's config) says of an ensemble tensor: its dtype and its full
// dims, with the batch dim (-1) first where that party batches
// (max_batch_size > 0). Comparing full dims is Triton's rule for a
// tensor passed between a batching and a non-batching party: a
// non-batching model's [-1,3] is a batching one's [3].
type spec struct {
	dtype kservepb.DataType
	dims  []int64
	from  string // "ensemble 'e'" or "model 'm'", for errors
	input bool   // an input the ensemble declares
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
// ErrEnsemble (and resolve's error, where that is the cause) and names
// the ensemble, the step and the tensor at fault, in the words of
// Triton's own checks where it has them.
func Build(name string, cfg *kservepb.ModelConfig, resolve Resolve) (*Graph, error) {
	if err := checkSettings(name, cfg); err != nil {
		return nil, err
	}
	g := &Graph{name: name, maxBatch: cfg.MaxBatchSize, producer: map[string]int{}, inflight: int(cfg.GetEnsembleScheduling().GetMaxInflightRequests())}
	specs := map[string][]spec{} // what each tensor is said to be, by whom; its producer first
	for _, in := range cfg.Input {
		if len(specs[in.Name]) > 0 {
			return nil, g.errorf("input '%s' of ensemble '%s' is declared twice: rename or remove one", in.Name, name)
		}
		specs[in.Name] = []spec{{in.DataType, full(in.Dims, g.maxBatch > 0), "ensemble '" + name + "'", true}}
	}
	for i, s := range cfg.GetEnsembleScheduling().GetStep() {
		st, err := g.step(i, s, resolve, specs)
		if err != nil {
			return nil, err
		}
		g.steps = append(g.steps, st)
	}
	if err := g.checkIO(cfg, specs); err != nil {
		return nil, err
	}
	for _, tensor := range sortedKeys(specs) {
		if err := g.checkTensor(tensor, specs[tensor]); err != nil {
			return nil, err
		}
	}
	if err := g.order(); err != nil {
		return nil, err
	}
	g.info = ensembleInfo(name, cfg)
	g.info.BatchReason = g.stepsReason()
	return g, nil
}

// Name is the ensemble's name.
func (g *Graph) Name() string { return g.name }

// Info describes the ensemble's inputs and outputs as its config declares
// them (a batch dim of -1 first when max_batch_size > 0). It does not
// batch itself (DynamicBatch false): an OIP request runs whole, and each
// step batches in its own model's queue.
func (g *Graph) Info() infer.ModelInfo { return g.info }

// Members lists the composing models of the steps in the order they
// run: each after the steps it needs, else in the config's order.
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

// checkSettings refuses what an ensemble cannot have, in Triton's words
// (model_config_utils.cc) where Triton refuses it too. Dynamic and
// sequence batching are a oneof with ensemble_scheduling, so a config
// that has one has no steps: it says why before Triton's "must be set".
func checkSettings(name string, cfg *kservepb.ModelConfig) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %q: %s", ErrEnsemble, name, fmt.Sprintf(format, args...))
	}
	sched := cfg.GetEnsembleScheduling()
	switch {
	case sched == nil && cfg.GetPlatform() != "ensemble":
		return bad("model '%s' is not an ensemble: set platform: \"ensemble\" and ensemble_scheduling", name)
	case cfg.GetDynamicBatching() != nil: // a oneof with ensemble_scheduling
		return bad("dynamic batching should not be specified for ensemble '%s': each step batches in its own model's queue; replace dynamic_batching with ensemble_scheduling", name)
	case cfg.GetSequenceBatching() != nil:
		return bad("sequence batching should not be specified for ensemble '%s': replace sequence_batching with ensemble_scheduling", name)
	case sched == nil:
		return bad("ensemble scheduling must be set for ensemble '%s' whose platform is ensemble: add ensemble_scheduling { step [...] }", name)
	case cfg.Platform != "ensemble":
		return bad("ensemble scheduling cannot be set for model '%s' whose platform is not ensemble: set platform: \"ensemble\"", name)
	case len(sched.Step) == 0:
		return bad("must specify 'step' for ensemble '%s': add ensemble_scheduling { step [...] }", name)
	case len(cfg.InstanceGroup) > 0:
		return bad("instance group should not be specified for ensemble '%s': each step runs on its own model's instances", name)
	case cfg.Optimization != nil:
		return bad("optimization should not be specified for ensemble '%s': set it on its composing models", name)
	case len(cfg.ModelWarmup) > 0:
		return bad("model_warmup can not be specified for ensemble '%s': warm its composing models up instead", name)
	case cfg.MaxBatchSize < 0:
		return bad("'max_batch_size' must be non-negative value for %s", name)
	case len(cfg.Input) == 0 || len(cfg.Output) == 0:
		return bad("ensemble '%s' must declare its input and output tensors", name)
	}
	return nil
}

// step checks step i of the ensemble and records what it says of each
// tensor in specs.
func (g *Graph) step(i int, s *kservepb.ModelEnsembling_Step, resolve Resolve, specs map[string][]spec) (*step, error) {
	m, err := g.member(i, s, resolve)
	if err != nil {
		return nil, err
	}
	st := &step{index: i, member: m, batched: m.Config.MaxBatchSize > 0}
	if err := g.bindInputs(st, s, specs); err != nil {
		return nil, err
	}
	if err := g.bindOutputs(st, s, specs); err != nil {
		return nil, err
	}
	return st, nil
}

// member checks step i's own fields and resolves its model.
func (g *Graph) member(i int, s *kservepb.ModelEnsembling_Step, resolve Resolve) (Member, error) {
	switch {
	case s.ModelName == "":
		return Member{}, g.errorf("must specify 'model_name' in step %d of ensemble '%s'", i, g.name)
	case len(s.InputMap) == 0:
		return Member{}, g.errorf("must specify 'input_map' in step %d of ensemble '%s' (model '%s')", i, g.name, s.ModelName)
	case len(s.OutputMap) == 0:
		return Member{}, g.errorf("must specify 'output_map' in step %d of ensemble '%s' (model '%s')", i, g.name, s.ModelName)
	case s.ModelVersion < -1:
		return Member{}, g.errorf("step %d: model_version %d of model '%s' is not valid: want -1 (the latest) or a version number",
			i, s.ModelVersion, s.ModelName)
	}
	version := s.ModelVersion
	if version == 0 {
		version = -1 // unset: the latest, as -1
	}
	m, err := resolve(s.ModelName, version)
	if err == nil && m.Config == nil {
		err = errors.New("its configuration is unknown")
	}
	if err != nil {
		return Member{}, fmt.Errorf("%w %q: step %d: ensemble '%s' depends on '%s' which is not available: %w", ErrEnsemble, g.name, i, g.name, s.ModelName, err)
	}
	// A model that does not batch (max_batch_size 0) may serve a batching
	// ensemble's step, as in Triton, when its dims carry the batch dim:
	// checkTensor compares the full dims.
	if mb := m.Config.MaxBatchSize; mb != 0 && mb < g.maxBatch {
		return Member{}, g.errorf("ensemble '%s' allows maximum batch size %d, but it contains model '%s' which only allows maximum batch size to be %d: lower the ensemble's max_batch_size to %d",
			g.name, g.maxBatch, s.ModelName, mb, mb)
	}
	return m, nil
}

// bindInputs binds the inputs of st's model to the tensors step s maps
// them to, in the model's input order. A step sends every input of its
// model, so each must be mapped, even an optional one.
func (g *Graph) bindInputs(st *step, s *kservepb.ModelEnsembling_Step, specs map[string][]spec) error {
	cfg := st.member.Config
	for _, k := range sortedKeys(s.InputMap) {
		if !slices.ContainsFunc(cfg.Input, func(in *kservepb.ModelInput) bool { return in.Name == k }) {
			return g.errorf("step %d: in ensemble '%s', ensemble tensor '%s' is mapping to non-existing input '%s' in model '%s': its inputs are %v",
				st.index, g.name, s.InputMap[k], k, s.ModelName, ioNames(cfg.Input))
		}
	}
	from := "model '" + s.ModelName + "'"
	for _, in := range cfg.Input {
		tensor, ok := s.InputMap[in.Name]
		if !ok {
			return g.errorf("step %d: in ensemble '%s', input '%s' in model '%s' is not mapped to any ensemble tensors: add it to input_map",
				st.index, g.name, in.Name, s.ModelName)
		}
		st.inputs = append(st.inputs, binding{in.Name, tensor})
		specs[tensor] = append(specs[tensor], spec{in.DataType, full(in.Dims, st.batched), from, false})
	}
	return nil
}

// bindOutputs binds the outputs step s maps to the ensemble tensors it
// names, each of which no other step (nor the ensemble's input) may
// produce.
func (g *Graph) bindOutputs(st *step, s *kservepb.ModelEnsembling_Step, specs map[string][]spec) error {
	from := "model '" + s.ModelName + "'"
	for _, k := range sortedKeys(s.OutputMap) {
		tensor := s.OutputMap[k]
		out := findOutput(st.member.Config, k)
		if out == nil {
			return g.errorf("step %d: in ensemble '%s', ensemble tensor '%s' is mapped from non-existing output '%s' in model '%s': its outputs are %v",
				st.index, g.name, tensor, k, s.ModelName, outputNames(st.member.Config.Output))
		}
		by := ""
		if p, dup := g.producer[tensor]; dup && p == st.index {
			by = "another output of model '" + s.ModelName + "' is mapped to it too"
		} else if dup {
			by = "step " + strconv.Itoa(p) + " produces it already"
		} else if slices.ContainsFunc(specs[tensor], func(s spec) bool { return s.input }) {
			by = "it is an input of the ensemble"
		}
		if by != "" {
			return g.errorf("ensemble tensor '%s' can appear in an output map only once for ensemble '%s' step %d (%s): rename it", tensor, g.name, st.index, by)
		}
		g.producer[tensor] = st.index
		st.outputs = append(st.outputs, binding{k, tensor})
		specs[tensor] = append([]spec{{out.DataType, full(out.Dims, st.batched), from, false}}, specs[tensor]...)
	}
	return nil
}

// full is dims with the batch dim first where its party batches.
func full(dims []int64, batching bool) []int64 {
	if batching {
		return append([]int64{-1}, dims...)
	}
	return dims
}

// checkIO checks the ensemble's own tensors: a step produces each output,
// and a step reads each input.
func (g *Graph) checkIO(cfg *kservepb.ModelConfig, specs map[string][]spec) error {
	for _, out := range cfg.Output {
		if _, ok := g.producer[out.Name]; !ok {
			return g.errorf("output '%s' for ensemble '%s' is not written: map a step's output to it in output_map", out.Name, g.name)
		}
		specs[out.Name] = append(specs[out.Name], spec{out.DataType, full(out.Dims, g.maxBatch > 0), "ensemble '" + g.name + "' output", false})
	}
	for _, in := range cfg.Input {
		if len(specs[in.Name]) < 2 {
			return g.errorf("ensemble input '%s' for ensemble '%s' is not used: map it in a step's input_map or remove it", in.Name, g.name)
		}
	}
	return nil
}

// checkTensor checks ensemble tensor, which ss describe (its producer
// first): it has a producer (a step or the ensemble's input), a consumer
// (a step or the ensemble's output) and one dtype and compatible dims
// wherever it appears.
func (g *Graph) checkTensor(tensor string, ss []spec) error {
	p, produced := g.producer[tensor]
	switch {
	case !produced && !ss[0].input:
		return g.errorf("in ensemble '%s', ensemble tensor '%s' is not connected: it is an input of %s, but no step produces it and the ensemble has no input of that name",
			g.name, tensor, ss[0].from)
	case produced && len(ss) == 1:
		return g.errorf("ensemble tensor '%s' is unused in ensemble '%s': step %d maps an output of %s to it, but no step reads it and it is not an ensemble output; remove it from output_map",
			tensor, g.name, p, ss[0].from)
	}
	for _, s := range ss[1:] {
		if s.dtype != ss[0].dtype {
			return g.errorf("in ensemble '%s', ensemble tensor '%s': inconsistent data type: %s is inferred from %s while %s is inferred from %s",
				g.name, tensor, ss[0].dtype, ss[0].from, s.dtype, s.from)
		}
		if !compatible(ss[0].dims, s.dims) {
			return g.errorf("in ensemble '%s', ensemble tensor '%s': inconsistent shape: %s is inferred from %s while %s is inferred from %s",
				g.name, tensor, dimsString(ss[0].dims), ss[0].from, dimsString(s.dims), s.from)
		}
	}
	return nil
}

// order sorts the steps so that each comes after the steps producing
// its inputs; a cycle is an error naming the steps it holds up.
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
					stuck = append(stuck, fmt.Sprintf("step %d (model '%s')", s.index, s.member.Name))
				}
			}
			return g.errorf("circular dependency between the steps of ensemble '%s': %s can never run, as they wait on steps that wait on them; break the cycle",
				g.name, strings.Join(stuck, ", "))
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

// dimsString writes dims as Triton does: [-1,3].
func dimsString(dims []int64) string {
	parts := make([]string, len(dims))
	for i, d := range dims {
		parts[i] = strconv.FormatInt(d, 10)
	}
	return "[" + strings.Join(parts, ",") + "]"
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

// stepsReason is the ensemble's batching reason, which status shows: its
// steps in run order, each with the job whose queue batches it.
func (g *Graph) stepsReason() string {
	parts := make([]string, len(g.steps))
	for i, s := range g.steps {
		parts[i] = fmt.Sprintf("%d:%s@%s(%s)", s.index, s.member.Name, s.member.Version, s.member.Job)
	}
	return "ensemble: steps " + strings.Join(parts, " ") + "; each batches in its model's queue"
}
