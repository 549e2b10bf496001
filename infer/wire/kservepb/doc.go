// Package kservepb is the Open Inference Protocol (KServe v2) gRPC API:
// grpc_predict_v2.proto (package inference, service GRPCInferenceService)
// and the Go code protoc generates from it. It is the contract between
// the gRPC door (bridge/grpcdoor), which serves the service, and the worker's
// codec (wire.MediaTypeKServeGRPC), which decodes ModelInferRequest and
// encodes ModelInferResponse; the door passes both through as bytes,
// reading only the model's name and version.
//
// Regenerate after editing the proto (protoc and the plugins on PATH,
// see docs/api.md, "gRPC door"):
//
//	go generate ./infer/wire/kservepb
package kservepb

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative grpc_predict_v2.proto
