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

// Predictor is one model on the wire: it decodes a request body with the
// codec of its content type, runs the records through an *infer.Engine
// and encodes their outputs in the same format. It implements
// mesh.Predictor, so a mesh.Worker serves the engine through it. Safe for
// concurrent use, as the engine is; it owns nothing and needs no Close
// (close the engine).
type Predictor struct {
	engine *infer.Engine
	spec   Spec
	hooks  infer.Hooks
}

// NewPredictor returns the Predictor of e, which answers OIP requests in
// the name of m. It reads e's model description and settings
// (post-processing, InputAlreadyBatched, Hooks) once.
func NewPredictor(e *infer.Engine, m Model) *Predictor {
	info := e.Info()
	if m.Name == "" {
		m.Name = info.Name
	}
	if m.Version == "" {
		m.Version = "1"
	}
	return &Predictor{
		engine: e,
		spec:   Spec{Model: m, Info: info, AlreadyBatched: e.AlreadyBatched(), Post: e.PostProcess(), RecordKey: e.RecordKey()},
		hooks:  e.Hooks(),
	}
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
	outs, err := p.engine.Infer(ctx, req.Records)
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
	ts := timing.Output
	if stage == infer.StageDecode {
		ts = timing.Input
	}
	timing.From(ctx).Add(ts, took)
	return err
}
