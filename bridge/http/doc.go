// Package httpdoor is the HTTP door of cluster-serving: the REST frontend of
// the original Cluster Serving (/predict, /metrics, /models/...) and the
// Open Inference Protocol (KServe v2) REST API under /v2.
//
// The door does no inference and no tensor decoding: it checks a request
// shallowly, bounds it (body size, token bucket, timeout) and passes the
// body as it came through a Submitter (in production a *mesh.Client) to the
// job of the model it names; workers decode, run and encode. The door maps
// errors to HTTP statuses with errors.As and answers every error as
// {"error": "<message>"}.
package httpdoor
