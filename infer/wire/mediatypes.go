package wire

// Media types of the bodies on the mesh (mesh.HeaderContentType), each
// served by the codec of the same name. A door passes a body through as
// it came, under the media type of its format; the worker's Predictor
// decodes it.
const (
	// MediaTypeJSON is the {"instances":[...]} -> {"predictions":[...]}
	// format of the original HTTP frontend (POST /predict), also spoken by
	// the NATS door. It is the default when a request names none.
	MediaTypeJSON = "application/json"
	// MediaTypeOIP is the Open Inference Protocol (KServe v2) REST body:
	// {"id","inputs":[{"name","datatype","shape","data"}],"outputs":[...]}
	// in, {"model_name","model_version","id","outputs":[...]} out. The
	// HTTP door sends the /v2/models/{m}/infer body under it.
	MediaTypeOIP = "application/vnd.cluster-serving.oip+json"
	// MediaTypeOIPBinary is an OIP REST body with the binary tensor data
	// extension (a JSON header, then raw tensors), framed with the
	// header's length: see FrameOIPBinary. The answer is framed alike.
	MediaTypeOIPBinary = "application/vnd.cluster-serving.oip-binary"
	// MediaTypeKServeGRPC is a proto-encoded OIP (KServe v2) gRPC
	// inference.ModelInferRequest (see kservepb) in and a
	// ModelInferResponse out. The gRPC door sends ModelInfer's request
	// under it.
	MediaTypeKServeGRPC = "application/vnd.cluster-serving.kserve-grpc+proto"
	// MediaTypeRedisArrow is the data field of a Redis entry without
	// serde: base64 of an Arrow IPC stream (see DecodeRedisArrow). The
	// answer is the result hash's value (see EncodeRedisArrow).
	MediaTypeRedisArrow = "application/vnd.cluster-serving.redis-arrow"
	// MediaTypeRedisJSON is the data field of a Redis entry with
	// serde=stream: JSON {"instances":[{...}]} holding one instance (see
	// DecodeInstances).
	MediaTypeRedisJSON = "application/vnd.cluster-serving.redis-json"
)
