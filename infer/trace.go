package infer

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// tracer starts infer's spans through the OTel API only: infer knows
// nothing of how traces are exported. Without an SDK installed every span
// is a no-op. Its spans are stage spans: telemetry.Setup records them
// only at trace detail "stages", keyed on this scope name.
var tracer = otel.Tracer("github.com/cluster-serving/cluster-serving/infer")

// Span names; they match telemetry's constants (infer imports none of our
// packages).
const (
	spanBatch = "infer batch"     // one run of stacked records; links to each request
	spanRun   = "onnxruntime run" // the ONNX Runtime call
)

const (
	attrBatchSize   = attribute.Key("cluster_serving.batch.size")
	attrBatchRows   = attribute.Key("cluster_serving.batch.rows")
	attrBatchWaitMS = attribute.Key("cluster_serving.batch.wait_ms")
	attrRunner      = attribute.Key("cluster_serving.runner")
)

// StartChild starts span name with t under ctx's span, except under a
// sampled-out parent (valid, not sampled, not recording), whose children
// never record under parent-based sampling: then it returns the parent as
// it is, as OTel's no-op tracer does, and a sampled-out request costs no
// span. infer and infer/wire use it; telemetry.Start does the same for
// the packages above them (infer imports none of ours, and telemetry
// must not import infer).
func StartChild(ctx context.Context, t trace.Tracer, name string) (context.Context, trace.Span) {
	p := trace.SpanFromContext(ctx)
	if sc := p.SpanContext(); sc.IsValid() && !sc.IsSampled() && !p.IsRecording() {
		return ctx, p
	}
	return t.Start(ctx, name)
}
