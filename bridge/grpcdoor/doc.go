// Package grpcdoor is the gRPC door: the Open Inference Protocol (KServe
// v2) gRPC service inference.GRPCInferenceService, in Triton's full
// version (see infer/wire/kservepb), with server reflection so that
// grpcurl and the like need no proto file, and the standard
// grpc.health.v1 service for Kubernetes' gRPC probes.
//
// ModelInfer goes to the model's job as the HTTP door sends OIP bodies:
// the request's bytes as they came, under wire.MediaTypeKServeGRPC, which
// the worker's codec decodes; the door reads only model_name and
// model_version to route it (see passCodec). The worker's
// ModelInferResponse bytes go back to the client the same way.
// ModelStreamInfer serves each request of its stream as a ModelInfer,
// StreamWindow at once, answering in order with errors in band (see
// streamInfer). The metadata, config and health RPCs are answered by the
// door from its Config or Catalog, the repository RPCs through the
// Catalog's door.Control (repository.go); the RPCs of Triton's it does not
// serve answer Unimplemented saying why (unsupported.go).
// The door shares the HTTP door's TLS files and token file (see
// door.ServerTLS and door.Tokens): a token comes as the metadata
// "authorization: Bearer TOKEN"; the health probes and reflection need
// none.
package grpcdoor
