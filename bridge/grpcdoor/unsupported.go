package grpcdoor

import (
	"context"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// Triton's RPCs that this server does not serve answer Unimplemented
// with what to do instead, rather than the generated "method X not
// implemented" (the CUDA shared memory RPCs: see shm.go).

// TraceSetting answers Unimplemented: tracing is OpenTelemetry's, set at
// start.
func (d *Door) TraceSetting(context.Context, *kservepb.TraceSettingRequest) (*kservepb.TraceSettingResponse, error) {
	return nil, grpcstatus.Error(codes.Unimplemented,
		"trace settings are not served: tracing is OpenTelemetry's, set at start (config keys tracesExporter, otlpEndpoint, or OTEL_* variables); the door continues a caller's traceparent metadata")
}

// LogSettings answers Unimplemented: the log is set at start.
func (d *Door) LogSettings(context.Context, *kservepb.LogSettingsRequest) (*kservepb.LogSettingsResponse, error) {
	return nil, grpcstatus.Error(codes.Unimplemented,
		"log settings are not served: the log is set at start (config keys logLevel and logFormat)")
}
