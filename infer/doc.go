// Package infer owns everything between a decoded request and a model run:
// tensors and their dtypes, the JSON instances codec, ONNX model loading
// through ONNX Runtime, post-processing (topN, pickTopN) and batching.
//
// The ONNX Runtime shared library is loaded once per process with [Init]
// ([FindLibrary] picks the path). A [Session] is one ONNX Runtime session and
// is the raw baseline; an [Engine] owns Parallelism sessions behind a
// [Batcher] and is what servers call: [Engine.Predict] for the JSON wire
// format, [Engine.Infer] for tensors.
//
// infer imports none of the project's other packages and never reads
// environment variables: callers pass paths and settings in.
package infer
