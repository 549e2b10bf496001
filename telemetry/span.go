package telemetry

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// EndSpan records err on span, with status Error, and ends it; a nil err
// ends it as it is. Every hop that returns an error from its span's work
// ends the span this way, so that a failed hop reads the same in any
// backend. Safe for concurrent use, as spans are.
func EndSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// SampledOut reports whether span belongs to a trace that is sampled out:
// its span context is valid but not sampled, and it does not record.
// Under parent-based sampling (what Setup installs, and OTel's default)
// no descendant of such a span records either.
func SampledOut(span trace.Span) bool {
	sc := span.SpanContext()
	return sc.IsValid() && !sc.IsSampled() && !span.IsRecording()
}

// Start starts span name of kind as the child of ctx's span, as
// tracer.Start does, except under a sampled-out parent (SampledOut): then
// it returns ctx and the parent span as they are, as OTel's no-op tracer
// does, because the child would not record. A sampled-out request so
// costs no span ids, sampler call, allocation or deeper context per hop,
// and the next hop still gets the trace id and the not-sampled flag.
// Callers set attributes only when span.IsRecording(), so that
// sampled-out requests build none; End, SetStatus and the like are no-ops
// on the parent. Safe for concurrent use, as tracers are.
func Start(ctx context.Context, tracer trace.Tracer, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	if _, off := otel.GetTracerProvider().(tracenoop.TracerProvider); off {
		// No SDK (Setup with traces exporter none installs the no-op
		// provider; the global one, not a flag, so that a test's own
		// provider is seen): ctx already carries the
		// caller's span context, which Inject passes on as a no-op
		// child would; finding the parent in a deep ctx cost 3% of a
		// 16-core node's CPU (issue 23).
		return ctx, noSpan
	}
	if p := trace.SpanFromContext(ctx); SampledOut(p) {
		return ctx, p
	}
	return tracer.Start(ctx, name, trace.WithSpanKind(kind))
}
