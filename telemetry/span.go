package telemetry

import (
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
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
