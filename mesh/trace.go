package mesh

import (
	"strconv"

	"github.com/cluster-serving/cluster-serving/infer/status"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/cluster-serving/cluster-serving/telemetry"
)

// tracer starts the mesh's spans. The global provider delegates to the
// one telemetry.Setup installs, even when Setup runs after this package
// is initialised; without Setup every span is a no-op.
var tracer = otel.Tracer(telemetry.ScopeName + "/mesh")

// stageTracer starts the mesh's spans that only trace detail "stages"
// records (telemetry.WithTraceDetail): the publish, the queue wait and
// the reply or result write. At detail "request" it starts nothing and
// hands back ctx, so the worker's process span is the door span's child.
var stageTracer = otel.Tracer(telemetry.MeshStagesScope)

// endStatusSpan records the status of the answer on span, marks it an
// error unless it is status.OK, and ends it.
func endStatusSpan(span trace.Span, st int) {
	if !span.IsRecording() {
		span.End() // a no-op for OTel's spans; still, every span is ended
		return
	}
	span.SetAttributes(telemetry.AttrStatus.Int(st))
	if st != status.OK {
		span.SetStatus(codes.Error, "st "+strconv.Itoa(st))
	}
	span.End()
}
