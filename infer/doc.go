// Package infer owns everything between decoded records and a model run:
// tensors and their dtypes, ONNX model loading through ONNX Runtime,
// image pre-processing, post-processing (topN, pickTopN) and batching.
//
// The ONNX Runtime shared library is loaded once per process with [Init]
// ([FindLibrary] picks the path). A [Session] is one ONNX Runtime session and
// is the raw baseline; an [Engine] owns Parallelism sessions behind a
// [Batcher] and is what servers run records through with [Engine.Infer].
// The wire formats (JSON instances, Open Inference Protocol, the Redis
// payloads) live in package infer/wire, which turns request bodies into
// records and outputs back into answers.
//
// infer imports none of the project's other packages and never reads
// environment variables: callers pass paths and settings in.
package infer
