package wire

import "go.opentelemetry.io/otel"

// tracer starts the decode and encode spans through the OTel API only, as
// infer's do: wire knows nothing of how traces are exported. Without an
// SDK installed every span is a no-op.
var tracer = otel.Tracer("github.com/cluster-serving/cluster-serving/infer/wire")
