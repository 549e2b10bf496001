// Package kservepb is the Open Inference Protocol (KServe v2) gRPC API:
// grpc_predict_v2.proto (package inference, service GRPCInferenceService)
// and the Go code protoc generates from it. It is the contract between
// the gRPC door (bridge/grpc), which serves the service, and the worker's
// codec (wire.MediaTypeKServeGRPC), which decodes ModelInferRequest and
// encodes ModelInferResponse. The door re-encodes the request gRPC
// decoded for it and decodes the worker's answer for gRPC to encode:
// about 2 to 3 ms per 4 MiB message each way on 2 cores, which a
// pass-through codec could save.
//
// Regenerate after editing the proto (protoc and the plugins on PATH,
// see the README):
//
//	go generate ./infer/wire/kservepb
package kservepb

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative grpc_predict_v2.proto
