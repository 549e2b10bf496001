// Package redis is the Redis door: it lets the Analytics Zoo / BigDL
// Cluster Serving Python clients (InputQueue.enqueue, OutputQueue.query)
// work unchanged against a real Redis server.
//
// A Door reads the job's request stream (consumer group "serving") with
// XREADGROUP, hands each block's entries as they came to the mesh
// together through Mesh.EnqueueBatch (each entry's data, a content type
// from its serde field, and its traceparent; one work message for the
// block when the job has no store in flight), and XACKs and XDELs an
// entry only once JetStream stored its request. A durable results
// consumer writes every result with HSET cluster-serving_<job>:<uri>
// value <v> (NaN for a failed record), pipelined, and acks results only
// after Redis accepted them. Every entry that reached the stream is
// answered once: a request's message id is <job>:<entry id>, its result
// carries it, and the result is written once (writeOnce), so an entry
// handed over twice (after a crash between the publish and the XACK) is
// answered once, though it may run twice.
//
// An entry that can never be queued (a uri over mesh.MaxURIBytes, data
// over the NATS max payload, no data, anything the mesh refuses with 400,
// 404 or 413) is answered NaN under its exact key and acked at once; only
// transient failures are retried, for at most Config.Timeout per block,
// after which the entry stays pending and is tried again later. Repeated
// failures are logged once per cause with a count (telemetry.LogLimit).
//
// Security: Config.Addr may carry an ACL user and password
// (redis://user:password@host:port) and turns TLS on with rediss://;
// Config.TLS, built with LoadTrustStore (a PEM CA or a Java PKCS#12 trust
// store) and TLSConfig (a client certificate for mutual TLS), sets the
// roots and the client certificate. No log line or error of the package
// holds the password.
//
// The package does not import NATS; cmd passes a *mesh.Client as the Mesh.
package redisdoor
