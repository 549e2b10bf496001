// Package mesh owns the NATS side of cluster serving: subject and stream
// names, the JetStream work queue that inference workers pull from, the
// request-reply client the doors use, the NATS micro endpoint, and the
// durable results stream.
//
// One request moves like this: a door calls Client.Submit (synchronous) or
// Client.Enqueue (durable). Either publishes the payload, as it came, to a
// partition of the job's work queue that answers (SERVING_<job>, or
// SERVING_<job>~<p>: see partition.go; a partition without a leader is
// skipped) with headers naming the record id, content type, deadline and
// where the answer goes. A Worker pulls the message from any partition, calls its Predictor, sends the result (core NATS to Cs-Reply-To,
// JetStream with a PubAck to Cs-Result-To) and only then acks. Statuses and
// error meanings are infer/wire's: the worker maps a Predict error with
// status.Of; bad input is answered with status 400 and terminated; other
// failures are retried with a growing NakWithDelay until the configured
// attempts are spent, when the caller gets a 500 and the record is
// terminated, so nothing stays stuck. A non-200 result reaches the caller as
// a *status.Error; a full queue, a closed client or a queue no partition of
// which stored the request in time (ErrUnavailable) as an error wrapping
// status.ErrBusy, a body or header past what NATS takes as one wrapping
// status.ErrTooLarge.
//
// mesh reaches inference only through the Predictor interface (in
// production a *wire.Predictor), so tests can use a fake and infer does not
// import NATS.
package mesh
