// Package modelconfig is Triton's model configuration for the models this
// server runs: it reads a model's config.pbtxt (Triton's ModelConfig
// message in protobuf text format), completes what the file leaves out
// from the ONNX graph as Triton's auto-complete does, checks what it
// declares against the graph, and turns it into the engine's settings.
// The doors answer the completed config at GET /v2/models/{m}/config and
// over gRPC ModelConfig.
package modelconfig
