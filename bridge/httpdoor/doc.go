// Package httpdoor is the HTTP door of cluster-serving: the REST frontend of
// the original Cluster Serving (/predict, /metrics, /models/...) and the
// Open Inference Protocol (KServe v2) REST API under /v2.
//
// The door does no inference and does not parse bodies: it bounds a
// request (body size, token bucket, timeout) and passes the body as it came
// through a Submitter (in production a *mesh.Client) to the job of the model
// it names, under the media type of its route (wire.MediaTypeJSON for
// /predict, wire.MediaTypeOIP for /v2/.../infer); workers decode, run and
// encode, and the door writes their answer as it is. The door maps errors
// to HTTP statuses with status.Of, its own included (404, 413, 429 are
// *status.Error), and answers every error as {"error": "<message>"}.
//
// The door defends itself before any of that: with Config.TLSCertFile it
// speaks HTTPS only, with TLSClientCAFile it refuses clients without a
// certificate at the handshake, and with TokenFile it answers 401 to a
// request without a valid bearer token (all routes but the welcome page
// and the health probes) before reading its body; a Content-Length over
// MaxBodyBytes gets 413 on every route.
package httpdoor
