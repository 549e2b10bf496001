package mesh

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/cluster-serving/cluster-serving/telemetry"
)

// tracer starts the mesh's spans. The global provider delegates to the
// one telemetry.Setup installs, even when Setup runs after this package
// is initialised; without Setup every span is a no-op.
var tracer = otel.Tracer(telemetry.ScopeName + "/mesh")

// Span attribute keys of the mesh (messaging semantic conventions where
// one fits).
const (
	attrSystem      = attribute.Key("messaging.system")
	attrDestination = attribute.Key("messaging.destination.name")
	attrMsgID       = attribute.Key("messaging.message.id")
	attrDelivery    = attribute.Key("messaging.delivery_count")
	attrQueueWaitMS = attribute.Key("cluster_serving.queue_wait_ms")
	attrStatus      = attribute.Key("cluster_serving.status")
	attrURI         = attribute.Key("cluster_serving.uri")
)

// endSpan records err on span (status Error) and ends it.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// outcome maps a result status to the outcome attribute of metrics.
func outcome(status int) string {
	switch status {
	case StatusOK:
		return telemetry.OutcomeOK
	case StatusBadInput:
		return telemetry.OutcomeBadInput
	case StatusTimeout:
		return telemetry.OutcomeTimeout
	case StatusBusy:
		return telemetry.OutcomeRejected
	default:
		return telemetry.OutcomeError
	}
}
