package prepost

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// Backend is the backend a step's config.pbtxt names.
const Backend = "cluster_serving"

// The steps, values of the parameter "step".
const (
	StepImage = "image"
	StepTopN  = "topN"
)

// Step is one pre- or post-processing step configured by a config.pbtxt:
// a model with no ONNX graph. It implements wire.Runner (Infer) and
// describes itself as a model does (Info, Config). Safe for concurrent
// use; it holds no resources and needs no Close.
type Step struct {
	info    infer.ModelInfo
	config  *kservepb.ModelConfig
	batched bool // max_batch_size > 0: records may be rows
	// run runs record i, whose input t is checked; whole means t keeps
	// its batch dim. It returns info.Outputs, in order.
	run func(ctx context.Context, i int, t infer.Tensor, whole bool) ([]infer.Tensor, error)
	// parallel runs the records of a request at once (image decodes,
	// bounded by infer's decode slots); topN is too cheap to gain.
	parallel bool
}

// Is reports whether cfg declares a step: backend "cluster_serving".
func Is(cfg *kservepb.ModelConfig) bool { return cfg.GetBackend() == Backend }

// New returns the step cfg declares (see the package doc for the
// format), its config checked up front: an unknown step or parameter, a
// bad value, a platform, an ensemble schedule, a negative max_batch_size,
// or inputs and outputs that disagree with the step's are an error
// wrapping ErrConfig that names the field or parameter. cfg is not kept
// or changed.
func New(cfg *kservepb.ModelConfig) (*Step, error) {
	name := cfg.GetName()
	switch {
	case !Is(cfg):
		return nil, fieldError(name, "backend", "got %q, want %q", cfg.GetBackend(), Backend)
	case cfg.Platform != "":
		return nil, fieldError(name, "platform", "got %q, want none: a %s step runs no model file", cfg.Platform, Backend)
	case cfg.GetEnsembleScheduling() != nil:
		return nil, fieldError(name, "ensemble_scheduling", "a %s step is not an ensemble", Backend)
	case cfg.MaxBatchSize < 0:
		return nil, fieldError(name, "max_batch_size", "got %d, want >= 0", cfg.MaxBatchSize)
	}
	p := newParams(cfg)
	kind, _ := p.str(ParamStep)
	var s *Step
	var err error
	switch kind {
	case StepImage:
		s, err = newImage(cfg, p)
	case StepTopN:
		s, err = newTopN(cfg, p)
	default:
		return nil, p.errorf(ParamStep, "got %q, want %q or %q", kind, StepImage, StepTopN)
	}
	if err == nil {
		err = p.unknown(kind)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Info returns the step's model description: its inputs and outputs,
// with the batch dim -1 first when max_batch_size > 0.
func (s *Step) Info() infer.ModelInfo { return s.info }

// Config returns the step's completed config: cfg with the inputs and
// outputs it leaves out filled from Info (dims without the batch dim), as
// an ensemble's Build reads a composing model's. The caller owns it.
func (s *Step) Config() *kservepb.ModelConfig { return proto.CloneOf(s.config) }

// Infer runs records, each one tensor (the step's input) without the
// batch dim, or whole with it (a request a codec could not split), as
// infer.Engine.Infer takes them; the outputs come back the same way, one
// per Info output. A record that does not fit the step (dtype, shape, an
// undecodable image) is an *infer.InputError naming it; infer's image
// budget errors (infer.ErrImageBudget) and ctx's come back as they are.
func (s *Step) Infer(ctx context.Context, records [][]infer.Tensor) ([][]infer.Tensor, error) {
	out := make([][]infer.Tensor, len(records))
	one := func(ctx context.Context, i int) error {
		t, whole, err := s.check(i, records[i])
		if err == nil {
			out[i], err = s.run(ctx, i, t, whole)
		}
		return inputAt(err, i, s.info.Inputs[0].Name)
	}
	if !s.parallel || len(records) == 1 {
		for i := range records {
			if err := one(ctx, i); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i := range records {
		g.Go(func() error { return one(gctx, i) })
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// check checks record i against the step's input as the engine does
// (infer.Engine.Infer): one tensor of the input's dtype, of the input's
// rank without the batch dim (a row) or with it (whole). A step that does
// not batch takes every record whole.
func (s *Step) check(i int, rec []infer.Tensor) (t infer.Tensor, whole bool, err error) {
	in := s.info.Inputs[0]
	if len(rec) != 1 {
		return t, false, infer.NewInputError(i, "", "got %d inputs, the step has 1 (%s)", len(rec), in.Name)
	}
	t = rec[0]
	if t.DType != in.DType {
		return t, false, infer.NewInputError(i, in.Name, "wrong dtype: got %s, want %s", t.DType, in.DType)
	}
	if err := t.Check(); err != nil {
		return t, false, infer.NewInputError(i, in.Name, "%v", err)
	}
	whole = !s.batched || len(t.Shape) == len(in.Shape)
	want := in.Shape
	if !whole {
		want = want[1:]
	}
	if !infer.FitsShape(t.Shape, want) {
		return t, false, infer.NewInputError(i, in.Name, "shape %s does not match the step's %s", infer.ShapeString(t.Shape), infer.ShapeString(in.Shape))
	}
	return t, whole, nil
}

// inputAt names record i and input in an *infer.InputError that names
// neither (infer's image errors); other errors come back as they are.
func inputAt(err error, i int, input string) error {
	var ie *infer.InputError
	if errors.As(err, &ie) && ie.Instance < 0 && ie.Input == "" {
		return infer.NewInputError(i, input, "%s", ie.Msg)
	}
	return err
}

// describe sets s's Info and completed Config from cfg and the step's
// input and outputs (dims without the batch dim): cfg's own declarations
// where it lists them (see agree), else the step's.
func (s *Step) describe(cfg *kservepb.ModelConfig, in infer.IO, outs []infer.IO) error {
	name := cfg.GetName()
	ins, err := agree(name, "input", decls(cfg.Input), []infer.IO{in}, true)
	if err != nil {
		return err
	}
	if outs, err = agree(name, "output", decls(cfg.Output), outs, false); err != nil {
		return err
	}
	s.batched = cfg.MaxBatchSize > 0
	s.info = infer.ModelInfo{Name: name, Inputs: batchDim(ins, s.batched), Outputs: batchDim(outs, s.batched),
		DynamicBatch: s.batched, BatchReason: "max_batch_size 0: each request runs whole"}
	if s.batched {
		s.info.BatchReason = "max_batch_size > 0: each row runs alone (" + Backend + " step)"
	}
	s.config = proto.CloneOf(cfg)
	if len(cfg.Input) == 0 {
		for _, io := range ins {
			s.config.Input = append(s.config.Input, &kservepb.ModelInput{Name: io.Name, DataType: dataType(io.DType), Dims: io.Shape})
		}
	}
	if len(cfg.Output) == 0 {
		for _, io := range outs {
			s.config.Output = append(s.config.Output, &kservepb.ModelOutput{Name: io.Name, DataType: dataType(io.DType), Dims: io.Shape})
		}
	}
	return nil
}

// batchDim returns ios with the batch dim -1 first when batched.
func batchDim(ios []infer.IO, batched bool) []infer.IO {
	out := slices.Clone(ios)
	for i := range out {
		if batched {
			out[i].Shape = append([]int64{-1}, out[i].Shape...)
		}
	}
	return out
}

// Parameter keys of a step's config.pbtxt. The step's own settings keep
// the names of the config.yaml keys (SPEC §4, §7), so a setting reads the
// same in both files.
const (
	ParamStep                   = "step"
	ParamImageResize            = "imageResize"
	ParamImageLayout            = "imageLayout"
	ParamImageChannels          = "imageChannels"
	ParamImageScale             = "imageScale"
	ParamImageMean              = "imageMean"
	ParamImageStd               = "imageStd"
	ParamImageMaxPixels         = "imageMaxPixels"
	ParamImageDecodeConcurrency = "imageDecodeConcurrency"
	ParamImageMemoryBudget      = "imageMemoryBudget"
	ParamPostProcessing         = "postProcessing"
)

// params reads a config's parameters{key: {string_value}}, noting every
// key a step asks for, so that a key no step asked for is reported by
// name (a misspelt imageResize must not silently keep the size).
type params struct {
	model string
	m     map[string]string
	asked []string
}

func newParams(cfg *kservepb.ModelConfig) *params {
	p := &params{model: cfg.GetName(), m: map[string]string{}}
	for k, v := range cfg.GetParameters() {
		p.m[k] = v.GetStringValue()
	}
	return p
}

// errorf is the error of parameter key.
func (p *params) errorf(key, format string, args ...any) error {
	return fieldError(p.model, "parameters "+key, format, args...)
}

// fieldError is ErrConfig wrapped with the model and the field at fault.
func fieldError(model, field, format string, args ...any) error {
	return fmt.Errorf("%w: model %q: %s: %s", ErrConfig, model, field, fmt.Sprintf(format, args...))
}

// str returns parameter key and whether it is set.
func (p *params) str(key string) (string, bool) {
	p.asked = append(p.asked, key)
	v, ok := p.m[key]
	return v, ok
}

// unknown reports the first parameter (in name order) that no step
// setting asked for, naming the ones step takes.
func (p *params) unknown(step string) error {
	keys := make([]string, 0, len(p.m))
	for k := range p.m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(p.asked, k) {
			return p.errorf(k, "not a parameter of the %s step (its parameters: %s)", step, strings.Join(p.asked, ", "))
		}
	}
	return nil
}

// into parses parameter key, when set, as len(dst) comma-separated
// values (config.yaml's "h,w" and "a,b,c") into dst; unset leaves dst as
// it is. want says what the value should look like.
func into[T any](p *params, key string, parse func(string) (T, error), want string, dst ...*T) error {
	v, ok := p.str(key)
	if !ok {
		return nil
	}
	parts := strings.Split(v, ",")
	if len(parts) != len(dst) {
		return p.errorf(key, "got %q, want %s", v, want)
	}
	for i, s := range parts {
		x, err := parse(strings.TrimSpace(s))
		if err != nil {
			return p.errorf(key, "got %q, want %s", v, want)
		}
		*dst[i] = x
	}
	return nil
}

func parseFloat32(s string) (float32, error) {
	f, err := strconv.ParseFloat(s, 32)
	return float32(f), err
}

func parseInt64(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }

// imagePre reads the image step's parameters into an infer.ImagePre and
// checks it as infer checks an engine's image keys.
func imagePre(p *params) (infer.ImagePre, error) {
	var pre infer.ImagePre
	pre.Layout, _ = p.str(ParamImageLayout)
	pre.Channels, _ = p.str(ParamImageChannels)
	r, m, s := &pre.Resize, &pre.Mean, &pre.Std
	for _, err := range []error{
		into(p, ParamImageResize, strconv.Atoi, `"height,width"`, &r[0], &r[1]),
		into(p, ParamImageScale, parseFloat32, "a number", &pre.Scale),
		into(p, ParamImageMean, parseFloat32, `three numbers "a,b,c"`, &m[0], &m[1], &m[2]),
		into(p, ParamImageStd, parseFloat32, `three numbers "a,b,c"`, &s[0], &s[1], &s[2]),
		into(p, ParamImageMaxPixels, strconv.Atoi, "an integer", &pre.MaxPixels),
		into(p, ParamImageDecodeConcurrency, strconv.Atoi, "an integer", &pre.DecodeConcurrency),
		into(p, ParamImageMemoryBudget, parseInt64, "a number of bytes", &pre.MemoryBudget),
	} {
		if err != nil {
			return pre, err
		}
	}
	if key, err := pre.Validate(); err != nil {
		return pre, p.errorf(key, "%v", err)
	}
	return pre, nil
}

// topN reads the topN step's postProcessing: "topN(n)".
func topN(p *params) (int, error) {
	v, ok := p.str(ParamPostProcessing)
	if !ok {
		return 0, p.errorf(ParamPostProcessing, `required: "topN(n)", the best n scores`)
	}
	pp, err := infer.ParsePostProcessing(v)
	switch {
	case err != nil:
		return 0, p.errorf(ParamPostProcessing, "%v", err)
	case pp.Kind != "topN":
		return 0, p.errorf(ParamPostProcessing, `got %q, want "topN(n)": the topN step ranks scores (pickTopN prints a 2-D output's rows; use it in config.yaml)`, v)
	}
	return pp.N, nil
}
