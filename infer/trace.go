package infer

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
)

// tracer starts infer's spans through the OTel API only: infer knows
// nothing of how traces are exported. Without an SDK installed every span
// is a no-op.
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
