// Package serving runs models on the mesh: one Unit per model and one Node
// per process, plus config.yaml (File), which maps onto both.
//
// A Unit is one model's life: NewUnit loads it (infer.New), Run ensures
// the job's streams and runs its mesh.Worker until ctx ends, then drains
// within the shutdown grace; StopNow closes the engine instead, so that
// in-flight requests go back to the queue.
//
// A Node is the mesh side of one process, built the same way by every
// command (start, worker, http, bridge) and by tests: the embedded NATS
// server or an external one, the connection, the Units (or, for a process
// that only runs doors, the jobs' streams and the models' descriptions),
// a mesh.Client, the NATS door when asked, readiness and queue-depth
// gauges. NewNode builds it, Run serves, Close stops it in order. How Run
// stops is the cause of its ctx: ErrStopNow (Ctrl-C, `stop`) or a drain
// (SIGTERM, `shutdown`).
//
// Doors other than NATS depend on mesh, never the reverse: serving does
// not start them. The caller (cmd) starts the HTTP and Redis doors with
// Node.Client and Node.Models, in the same errgroup as Node.Run, and calls
// Close once all have returned.
//
// A zero setting in File means the default of the package that uses it;
// File fills only what config.yaml itself derives (jobName, model
// versions, threads from coreNumberPerMachine).
package serving
