package wire

import (
	"context"
	"time"

	"github.com/cluster-serving/cluster-serving/infer/status"

	"go.opentelemetry.io/otel/codes"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/timing"
)

// Model names the model a Predictor serves, as an OIP answer reports it
// (model_name, model_version).
type Model struct {
	// Name is the served model's name; "" means the engine's
	// ModelInfo.Name (the model file's base name).
	Name string
	// Version is the served version; "" means "1", the HTTP door's default.
	Version string
}

// Runner runs decoded records, as *infer.Engine's Infer does: each
// record one tensor per model input, in model order, without the batch
// dim unless the Spec says AlreadyBatched (or whole, when a codec could
// not split it); outputs come back the same way, one per model output.
// An ensemble's scheduler (mesh/pipeline) is the other Runner.
type Runner interface {
	Infer(ctx context.Context, records [][]infer.Tensor) ([][]infer.Tensor, error)
}

// OutputRunner is a Runner that can leave out the outputs a request did
// not ask for (an ensemble skips the steps only they need). outputs nil
// means all; an output left out is a zero infer.Tensor in its place.
type OutputRunner interface {
	Runner
	InferOutputs(ctx context.Context, records [][]infer.Tensor, outputs []string) ([][]infer.Tensor, error)
}

// Predictor is one model on the wire: it decodes a request body with the
// codec of its content type, runs the records through a Runner (an
// *infer.Engine) and encodes their outputs in the same format. It
// implements mesh.Predictor, so a mesh.Worker serves the engine through
// it. Safe for concurrent use, as the runner is; it owns nothing and
// needs no Close (close the engine).
type Predictor struct {
	runner Runner
	spec   Spec
	hooks  infer.Hooks
	// untimed: decoding and encoding are not the request's compute time
	// (an ensemble's is its steps').
	untimed bool
	// cache keeps the outputs of the requests answered (WithCache); nil:
	// none.
	cache Cache
}

// NewPredictor returns the Predictor of e, which answers OIP requests in
// the name of m. It reads e's model description and settings
// (post-processing, InputAlreadyBatched, MaxRequestBatch, Hooks) once.
func NewPredictor(e *infer.Engine, m Model) *Predictor {
	info := e.Info()
	if m.Name == "" {
		m.Name = info.Name
	}
	if m.Version == "" {
		m.Version = "1"
	}
	return &Predictor{
		runner: e,
		spec: Spec{Model: m, Info: info, AlreadyBatched: e.AlreadyBatched(), Post: e.PostProcess(), RecordKey: e.RecordKey(),
			MaxBatch: e.MaxRequestBatch()},
		hooks: e.Hooks(),
	}
}

// NewRunnerPredictor returns the Predictor of r, whose codecs know the
// model as spec says (spec.Model.Version "" means "1") and whose decode
// and encode times go to hooks. With computeOfRunner, those times are
// not added to the request's compute times (timing.From): the runner
// adds its own, as an ensemble adds its steps' (Triton's rule).
func NewRunnerPredictor(r Runner, spec Spec, hooks infer.Hooks, computeOfRunner bool) *Predictor {
	if spec.Model.Version == "" {
		spec.Model.Version = "1"
	}
	return &Predictor{runner: r, spec: spec, hooks: hooks, untimed: computeOfRunner}
}

// Spec returns what the Predictor's codecs know of its model.
func (p *Predictor) Spec() Spec { return p.spec }

// Predict decodes body with the codec of contentType (see RegisterCodec;
// "" means MediaTypeJSON: {"instances":[...]} in, {"predictions":[...]}
// out), runs the records through the engine and encodes the outputs,
// post-processed when configured. Decoding and encoding each get a span
// and an infer.Hooks stage ("decode", "encode"). An unknown content type,
// and any body that does not fit the model, is an *infer.InputError; the
// engine's errors (infer.ErrQueueFull, infer.ErrClosed, ctx's) come back
// as they are; outputs the codec cannot write are a 500 that wraps
// status.ErrUnanswerable. Status maps any of them to its status.
func (p *Predictor) Predict(ctx context.Context, contentType string, body []byte) ([]byte, error) {
	codec, err := codecFor(contentType)
	if err != nil {
		return nil, err
	}
	var req *Request
	err = p.stage(ctx, infer.StageDecode, func() (err error) {
		req, err = codec.Decode(ctx, body, &p.spec)
		return err
	})
	if err != nil {
		return nil, err
	}
	var outs [][]infer.Tensor
	if or, ok := p.runner.(OutputRunner); ok {
		outs, err = or.InferOutputs(ctx, req.Records, req.Outputs)
	} else {
		outs, err = p.runner.Infer(ctx, req.Records)
	}
	if err != nil {
		return nil, err
	}
	var out []byte
	err = p.stage(ctx, infer.StageEncode, func() (err error) {
		out, err = codec.Encode(req, outs, &p.spec)
		return err
	})
	if err != nil && status.Of(err) == status.Internal {
		// Encoding the same outputs fails the same way every time.
		err = unanswerable{err}
	}
	if err == nil {
		p.store(ctx, codec, req, outs)
	}
	return out, err
}

// stage runs fn in a span named after the stage (the names of
// telemetry.SpanDecode and SpanEncode) and reports its time to the hooks
// and to the request's timing (ctx's, see timing.From): decoding is input
// time, encoding output time.
func (p *Predictor) stage(ctx context.Context, stage string, fn func() error) error {
	start := time.Now()
	_, span := infer.StartChild(ctx, tracer, stage) // none under a sampled-out parent
	err := fn()
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	took := time.Since(start)
	if p.hooks.Stage != nil {
		p.hooks.Stage(ctx, stage, took)
	}
	if p.untimed {
		return err
	}
	ts := timing.Output
	if stage == infer.StageDecode {
		ts = timing.Input
	}
	timing.From(ctx).Add(ts, took)
	return err
}
