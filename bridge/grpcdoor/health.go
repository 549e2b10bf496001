package grpcdoor

import (
	"context"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// health is the standard gRPC health service (grpc.health.v1.Health),
// which Kubernetes' gRPC probes and grpc_health_probe call: Check says
// SERVING once the door is ready (Config.Ready), NOT_SERVING before, for
// the whole server ("") and for inference.GRPCInferenceService. Watch
// and List are not served.
type health struct {
	healthpb.UnimplementedHealthServer
	d *Door
}

func (h health) Check(_ context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	switch req.Service {
	case "", kserveService:
	default:
		return nil, status.Errorf(codes.NotFound, "unknown service %q: want \"\" or %q", req.Service, kserveService)
	}
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if h.d.ready() {
		st = healthpb.HealthCheckResponse_SERVING
	}
	return &healthpb.HealthCheckResponse{Status: st}, nil
}
