// Package pipeline serves Triton ensembles on the mesh. An ensemble
// (config.pbtxt platform "ensemble", ensemble_scheduling { step [...] })
// is a job like any model's: its requests wait in its own work queue,
// and its worker's Runner is a Pipeline instead of an ONNX Runtime
// engine. For each request the Pipeline runs the steps as ordinary
// requests on the mesh, through the same mesh.Client the doors use: each
// step's request waits in its composing model's work queue and is
// batched there with every other caller of that model, so a step shared
// by two pipelines batches across both, and each step's workers scale on
// their own.
//
// Build checks an ensemble's configuration as Triton does (unknown model,
// a tensor produced twice or never, an unused input, a cycle, a
// max_batch_size above a composing model's, dtype or shape mismatches
// between steps, settings an ensemble cannot have); New runs a checked
// Graph. Steps whose inputs are ready run at once, in parallel; steps
// that feed no requested output are skipped; max_inflight_requests bounds
// the requests in flight at each step.
//
// Why the ensemble is a job and not code in the doors: the ensemble's
// work message is what a door acknowledges (a Redis record, a RESP XADD,
// an OIP call), and the ensemble worker acks it only once every step
// answered; a worker lost mid-pipeline hands the record back to the queue
// and another one runs the pipeline again, and the caller is answered by
// whichever finishes, once (the mesh's answered-once machinery). Steps
// are pure functions of their inputs, so running one again is safe.
package pipeline
