// Package kservepb is the inference gRPC API of Triton and the Open
// Inference Protocol (KServe v2): Triton's grpc_service.proto (package
// inference, service GRPCInferenceService, a superset of KServe's
// grpc_predict_v2.proto with the same messages, fields and numbers) and
// model_config.proto (ModelConfig, the message of a config.pbtxt), both
// as triton-inference-server/common ships them (commit 83adf7c, BSD-3,
// kept unchanged but for go_package under third_party/triton with their
// licence), and the Go code protoc generates from them.
//
// It is the contract between the gRPC door (bridge/grpcdoor), which
// serves the service, the worker's codec (wire.MediaTypeKServeGRPC),
// which decodes ModelInferRequest and encodes ModelInferResponse, and the
// model configuration (infer/modelconfig), which reads config.pbtxt.
//
// Regenerate after editing a proto (protoc and the plugins on PATH, see
// docs/api.md, "gRPC door"):
//
//	go generate ./infer/wire/kservepb
package kservepb

//go:generate protoc -I third_party/triton --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative grpc_service.proto model_config.proto
