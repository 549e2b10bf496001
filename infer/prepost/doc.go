// Package prepost runs the original Cluster Serving's pre- and
// post-processing as models of their own, so that a Triton ensemble can
// chain them around an ONNX model: an image step (encoded images in,
// the image tensor the Redis door would feed the model out) and a topN
// step (scores in, the best n out). A Step implements wire.Runner; the
// repository serves it through wire.NewRunnerPredictor like any model.
// It calls infer's image and topN code and copies none of it, so a step
// gives bit for bit what the engine path gives for the same settings.
//
// A model repository declares a step as a model directory holding a
// config.pbtxt and an empty version directory (1/): backend
// "cluster_serving" and the parameter "step". The other parameters keep
// the names and the syntax of the config.yaml keys (SPEC §4, §7):
//
//	name: "preprocess"
//	backend: "cluster_serving"
//	max_batch_size: 8
//	parameters { key: "step" value: { string_value: "image" } }
//	parameters { key: "imageResize" value: { string_value: "224,224" } }
//	parameters { key: "imageChannels" value: { string_value: "RGB" } }
//	parameters { key: "imageScale" value: { string_value: "0.00392157" } }
//	parameters { key: "imageMean" value: { string_value: "0.485,0.456,0.406" } }
//	parameters { key: "imageStd" value: { string_value: "0.229,0.224,0.225" } }
//
// The image step ("image") takes imageResize, imageLayout, imageChannels,
// imageScale, imageMean, imageStd, imageMaxPixels, imageDecodeConcurrency
// and imageMemoryBudget. Its input "image" is TYPE_STRING, dims [1] (one
// image a row) when max_batch_size > 0: each element a JPEG or PNG file's
// bytes, or its base64 text as the Redis door and JSON clients send it (an
// element whose first byte is ASCII is read as base64; JPEG and PNG files
// start with 0xFF and 0x89). Its output "tensor" is TYPE_FP32 dims
// [3,h,w] (imageLayout HWC: [h,w,3]; h and w are -1 without imageResize);
// a config may ask for TYPE_FP64, TYPE_INT32, TYPE_INT64 or TYPE_UINT8
// instead (integers round, uint8 saturates, as infer.CastFloat32 does).
// With max_batch_size 0 the input is a list of images, dims [-1] by
// default, and the output stacks them: dims [-1,3,h,w].
//
// The topN step ("topN") takes postProcessing, "topN(n)" as in
// config.yaml. Its input "scores" is TYPE_FP32 dims [-1] by default (any
// numeric type and dims may be declared); each row (each request without
// the batch dim) is flattened and ranked as the original's topN(n) ranks
// (best first, ties by index, NaN last). Its outputs, dims without the
// batch dim:
//   - "indices" TYPE_INT64 [k]: the 0-based indices of the best k scores;
//   - "values" TYPE_FP32 [k]: their scores;
//   - "text" TYPE_STRING [1]: the original's string, e.g.
//     "[[4,5.0][3,4.0]]", for clients of the Redis door's topN.
//
// k is n, or the row's size when that is smaller (-1 when the input's
// dims are dynamic). A config that lists inputs or outputs uses these
// names and may leave outputs out; its data types and dims must agree
// with the step's. Any other parameter is an error that names it.
package prepost
