package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// Trace detail levels accepted in Config.TraceDetail.
const (
	// TraceDetailRequest records the spans of a request at the processes
	// it crosses: the door's span and the worker's process span, its
	// child, which carries the queue wait, the delivery count and the
	// batch's size and wait as attributes (and the Redis door's result
	// write). The stages' times are in the stage metric.
	TraceDetailRequest = "request"
	// TraceDetailStages also records the publish, queue wait, decode,
	// infer batch, onnxruntime run, encode and reply (or result write)
	// spans: nine spans per request instead of two, and as many times
	// the cost to record and export.
	TraceDetailStages = "stages"
)

// MeshStagesScope is the instrumentation scope of the mesh's spans that
// only TraceDetailStages records (publish, queue wait, reply, result
// write); the mesh's door and process spans use ScopeName+"/mesh".
const MeshStagesScope = ScopeName + "/mesh/stages"

// stageScopes are the scopes whose tracers start stage spans only:
// infer's (infer batch, onnxruntime run), infer/wire's (decode, encode)
// and MeshStagesScope. The names are spelled out because
// telemetry must not import infer.
var stageScopes = map[string]bool{
	ScopeName + "/infer":      true,
	ScopeName + "/infer/wire": true,
	MeshStagesScope:           true,
}

// WithTraceDetail returns tp as Setup installs it for detail: for
// TraceDetailStages, tp itself; for TraceDetailRequest (or ""), a
// provider whose tracers of the stage scopes start nothing, so that a
// request records only its hop spans. Benchmarks and tests that install
// their own SDK provider use it to get what Setup would.
func WithTraceDetail(tp trace.TracerProvider, detail string) trace.TracerProvider {
	if detail == TraceDetailStages {
		return tp
	}
	return requestDetail{tp}
}

// requestDetail hands out stagesOff for the stage scopes and tp's tracers
// for every other scope.
type requestDetail struct {
	trace.TracerProvider
}

func (p requestDetail) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	if stageScopes[name] {
		return stagesOff{}
	}
	return p.TracerProvider.Tracer(name, opts...)
}

// noSpan is a span that records nothing and has no span context.
var noSpan = trace.SpanFromContext(context.Background())

// stagesOff is the tracer of a stage scope at TraceDetailRequest. Start
// returns ctx as it is and a span that records nothing: no ids, no
// sampler call, no allocation. The request's own span stays the one in
// ctx, so an error recorded on the returned span is not recorded twice.
type stagesOff struct{ embedded.Tracer }

func (stagesOff) Start(ctx context.Context, _ string, _ ...trace.SpanStartOption) (context.Context, trace.Span) {
	return ctx, noSpan
}
