package grpcdoor

import (
	"context"
	"time"

	"github.com/cluster-serving/cluster-serving/infer/status"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// ServerLive answers live: the door is up.
func (d *Door) ServerLive(context.Context, *kservepb.ServerLiveRequest) (*kservepb.ServerLiveResponse, error) {
	return &kservepb.ServerLiveResponse{Live: true}, nil
}

// ServerReady answers whether every model is loaded and has a worker
// (Config.Ready).
func (d *Door) ServerReady(context.Context, *kservepb.ServerReadyRequest) (*kservepb.ServerReadyResponse, error) {
	return &kservepb.ServerReadyResponse{Ready: d.ready()}, nil
}

func (d *Door) ready() bool { return d.cfg.Ready == nil || d.cfg.Ready() }

// ModelReady answers whether the model is ready: false, not NotFound,
// for a model or version the door does not serve (not loaded, unloaded,
// unknown), as Triton answers and as tritonclient's is_model_ready
// expects.
func (d *Door) ModelReady(_ context.Context, req *kservepb.ModelReadyRequest) (*kservepb.ModelReadyResponse, error) {
	_, err := d.model(req.Name, req.Version)
	return &kservepb.ModelReadyResponse{Ready: err == nil && d.ready()}, nil
}

// ServerMetadata names the server, its version and the protocol
// extensions it serves, those of HTTP GET /v2 (door.Extensions):
// model_repository when its Catalog can load and unload.
func (d *Door) ServerMetadata(context.Context, *kservepb.ServerMetadataRequest) (*kservepb.ServerMetadataResponse, error) {
	return &kservepb.ServerMetadataResponse{Name: "cluster-serving", Version: d.cfg.Version,
		Extensions: door.Extensions(door.ControlOf(d.cfg.Catalog) != nil)}, nil
}

// ModelConfig answers the model's Triton configuration (door.ConfigOf),
// as HTTP GET /v2/models/{m}/config does; NotFound for a model or
// version the door does not serve.
func (d *Door) ModelConfig(_ context.Context, req *kservepb.ModelConfigRequest) (*kservepb.ModelConfigResponse, error) {
	m, err := d.model(req.Name, req.Version)
	if err != nil {
		return nil, grpcError(err)
	}
	return &kservepb.ModelConfigResponse{Config: door.ConfigOf(m)}, nil
}

// ModelMetadata describes the model as the HTTP door's
// GET /v2/models/{m} does.
func (d *Door) ModelMetadata(_ context.Context, req *kservepb.ModelMetadataRequest) (*kservepb.ModelMetadataResponse, error) {
	m, err := d.model(req.Name, req.Version)
	if err != nil {
		return nil, grpcError(err)
	}
	out := &kservepb.ModelMetadataResponse{Name: m.Name, Platform: door.PlatformOf(m),
		Inputs: tensorMetas(m.Info.Inputs), Outputs: tensorMetas(m.Info.Outputs)}
	for _, o := range d.models() {
		if o.Name == m.Name {
			out.Versions = append(out.Versions, o.Version)
		}
	}
	return out, nil
}

func tensorMetas(ios []infer.IO) []*kservepb.ModelMetadataResponse_TensorMetadata {
	out := make([]*kservepb.ModelMetadataResponse_TensorMetadata, len(ios))
	for i, io := range ios {
		out[i] = &kservepb.ModelMetadataResponse_TensorMetadata{Name: io.Name, Datatype: wire.OIPDatatype(io.DType), Shape: io.Shape}
	}
	return out
}

// ModelInfer sends the request, proto-encoded, to the model's job under
// wire.MediaTypeKServeGRPC and returns the worker's ModelInferResponse.
// The server the door builds (Server) does not call it: its ModelInfer
// passes the bytes through to inferFrame, which this calls too. A request the worker cannot
// decode is InvalidArgument; see grpcError for the other codes.
func (d *Door) ModelInfer(ctx context.Context, req *kservepb.ModelInferRequest) (*kservepb.ModelInferResponse, error) {
	body, err := proto.Marshal(req)
	if err != nil {
		return nil, grpcstatus.Errorf(codes.Internal, "encode request: %v", err)
	}
	answer, err := d.inferFrame(ctx, &frame{b: body})
	if err != nil {
		return nil, err
	}
	out := &kservepb.ModelInferResponse{}
	if err := proto.Unmarshal(answer.b, out); err != nil {
		d.log.Warn("gRPC door: the worker's answer is no ModelInferResponse", "model", req.ModelName, "err", err)
		return nil, grpcstatus.Errorf(codes.Internal, "the worker's answer is no ModelInferResponse: %v", err)
	}
	return out, nil
}

// infer sends body, a proto-encoded ModelInferRequest, to the job of
// model name at version and returns the worker's answer, a proto-encoded
// ModelInferResponse, or a gRPC status error.
func (d *Door) infer(ctx context.Context, name, version string, body []byte) ([]byte, error) {
	m, err := d.model(name, version)
	if err != nil {
		return nil, grpcError(err)
	}
	start := time.Now()
	if err := d.bucket.Take(ctx); err != nil {
		d.record(ctx, m.Job, err, start)
		return nil, grpcError(err)
	}
	sched, err := door.ScheduleOf(m, wire.MediaTypeKServeGRPC, body)
	if err != nil {
		return nil, grpcError(err)
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	res, err := d.cfg.Submit(ctx, d.sub, m, mesh.Request{ContentType: wire.MediaTypeKServeGRPC, Body: body, Schedule: sched})
	d.record(ctx, m.Job, err, start)
	if err != nil {
		if st := status.Of(err); st >= 500 && st != status.Busy && st != status.Timeout {
			d.log.Warn("gRPC door", "status", st, "err", err)
		}
		return nil, grpcError(err)
	}
	return res.Body, nil
}

// record counts one inference request of job at this door, keeping its
// error (nil: none) among the last errors.
func (d *Door) record(ctx context.Context, job string, err error, start time.Time) {
	msg := ""
	if err != nil {
		msg = door.Message(err)
	}
	d.cfg.Metrics.RecordAnswer(ctx, telemetry.DoorGRPC, job, status.Of(err), msg, time.Since(start))
}

// models lists the served models: the Catalog's now when there is one.
func (d *Door) models() []Model { return door.Models(d.cfg.Catalog, d.cfg.Models) }

// model finds name at version ("" = the last listed version of name).
func (d *Door) model(name, version string) (Model, error) {
	return door.Lookup(d.models(), d.cfg.Catalog, name, version)
}

// Code maps a wire status to its gRPC code: 400 InvalidArgument, 401
// Unauthenticated, 403 PermissionDenied, 404 NotFound, 413 and 429 ResourceExhausted, 499
// Canceled, 503 Unavailable, 504 DeadlineExceeded, anything else
// Internal.
func Code(st int) codes.Code {
	switch st {
	case status.OK:
		return codes.OK
	case status.BadInput:
		return codes.InvalidArgument
	case 401:
		return codes.Unauthenticated
	case 403:
		return codes.PermissionDenied
	case status.NotFound:
		return codes.NotFound
	case status.TooLarge, status.TooManyRequests:
		return codes.ResourceExhausted
	case status.ClientClosed:
		return codes.Canceled
	case status.Busy:
		return codes.Unavailable
	case status.Timeout:
		return codes.DeadlineExceeded
	}
	return codes.Internal
}

// grpcError is err as a gRPC status: the code of status.Of(err) and the
// message the HTTP door would answer with (door.Message).
func grpcError(err error) error {
	return grpcstatus.Error(Code(status.Of(err)), door.Message(err))
}
