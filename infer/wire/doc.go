// Package wire is the contract between the doors and the workers: what a
// request body and its answer look like on the mesh, and what a failure
// means.
//
//   - Media types ([MediaTypeJSON], [MediaTypeOIP], [MediaTypeRedisArrow],
//     [MediaTypeRedisJSON]) name the formats a door passes through as they
//     came; each has a [Codec] that decodes a body into records and encodes
//     the model's outputs into the answer: JSON instances, the Open
//     Inference Protocol envelope and tensors, the Redis door's base64
//     Arrow IPC and one-instance JSON.
//   - A [Predictor] puts the codecs in front of an *infer.Engine; it is
//     what a mesh.Worker runs (it implements mesh.Predictor).
//   - Statuses (HTTP's codes) and their sentinels ([status.ErrBadInput],
//     [status.ErrBusy], ...), [Error], the non-200 answer carried across the mesh,
//     and [Status], the one mapping from an error to its status: the HTTP
//     door answers with it, the NATS door sends it as its error code, the
//     worker terminates or retries a record by it, the Redis door retries
//     503s and answers NaN for what can never be served.
//
// wire imports infer only; doors and the mesh import wire, never the
// reverse. Decoding runs on the workers, so that the expensive work scales
// out with them: doors pass bodies through as they came, and write the
// worker's answer as it is.
package wire
