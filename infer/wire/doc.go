// Package wire is the contract between the doors and the workers: what a
// request body and its answer look like on the mesh.
//
//   - Media types ([MediaTypeJSON], [MediaTypeOIP], [MediaTypeRedisArrow],
//     [MediaTypeRedisJSON]) name the formats a door passes through as they
//     came; each has a [Codec] that decodes a body into records and encodes
//     the model's outputs into the answer: JSON instances, the Open
//     Inference Protocol envelope and tensors, the Redis door's base64
//     Arrow IPC and one-instance JSON.
//   - A [Predictor] puts the codecs in front of an *infer.Engine; it is
//     what a mesh.Worker runs (it implements mesh.Predictor).
//
// wire imports infer only; doors and the mesh import wire, never the
// reverse. Decoding runs on the workers, so that the expensive work scales
// out with them.
package wire
