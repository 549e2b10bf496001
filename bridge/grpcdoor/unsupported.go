package grpcdoor

import (
	"context"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// Triton's RPCs that this server does not serve answer Unimplemented
// with what to do instead, rather than the generated "method X not
// implemented".

// errNoCUDAMemory answers the CudaSharedMemory RPCs.
var errNoCUDAMemory = grpcstatus.Error(codes.Unimplemented,
	"CUDA shared memory is not supported: this server runs ONNX Runtime on the CPU, and the mesh carries tensors as bytes between processes; use system shared memory (SystemSharedMemoryRegister) or send the tensors in the request")

// CudaSharedMemoryStatus answers Unimplemented (errNoCUDAMemory).
func (d *Door) CudaSharedMemoryStatus(context.Context, *kservepb.CudaSharedMemoryStatusRequest) (*kservepb.CudaSharedMemoryStatusResponse, error) {
	return nil, errNoCUDAMemory
}

// CudaSharedMemoryRegister answers Unimplemented (errNoCUDAMemory).
func (d *Door) CudaSharedMemoryRegister(context.Context, *kservepb.CudaSharedMemoryRegisterRequest) (*kservepb.CudaSharedMemoryRegisterResponse, error) {
	return nil, errNoCUDAMemory
}

// CudaSharedMemoryUnregister answers Unimplemented (errNoCUDAMemory).
func (d *Door) CudaSharedMemoryUnregister(context.Context, *kservepb.CudaSharedMemoryUnregisterRequest) (*kservepb.CudaSharedMemoryUnregisterResponse, error) {
	return nil, errNoCUDAMemory
}

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
