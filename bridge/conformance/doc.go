// Package conformance holds the door conformance suite (its tests only):
// ONNX's node test cases, generated on the machine by Debian's
// python3-onnx, each run first on ONNX Runtime directly (to tell which
// cases are applicable at all), then served by a real `cluster-serving
// start` and sent through its doors: the Open Inference Protocol over
// HTTP (/v2/models/{m}/infer) and over gRPC (ModelInfer). The test prints
// pass / fail / not applicable by reason, per door.
//
// A case is not applicable only when ONNX Runtime itself cannot load or
// run it (shown by the direct run, whose error is the reason) or its
// inputs or outputs are not tensors (sequences, optionals, maps). Every
// other case counts: a model cluster-serving refuses to load, an answer
// other than 200, or outputs that differ from ONNX's expected ones
// (rtol 1e-3) are failures.
//
// `go test ./bridge/conformance` runs a sample of about 60 cases;
// `make conformance` runs every case (CLUSTER_SERVING_CONFORMANCE=all),
// and CLUSTER_SERVING_CONFORMANCE=<regexp> picks cases by name.
package conformance
