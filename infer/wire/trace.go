package wire

import "go.opentelemetry.io/otel"

// tracer starts the decode and encode spans through the OTel API only, as
// infer's do: wire knows nothing of how traces are exported. Without an
// SDK installed every span is a no-op. telemetry.Setup records them only
// at trace detail "stages", keyed on this scope name.
var tracer = otel.Tracer("github.com/cluster-serving/cluster-serving/infer/wire")
