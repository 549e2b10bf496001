package modelconfig

import "errors"

// Sentinel errors. Callers test them with errors.Is; each is wrapped with
// the file, field or version at fault.
var (
	// ErrSyntax means config.pbtxt is not a ModelConfig in protobuf text
	// format; the message names the file, line and column.
	ErrSyntax = errors.New("modelconfig: config.pbtxt syntax")
	// ErrPlatform means a config names a platform or backend other than
	// ONNX Runtime's; the message says how to export the model to ONNX.
	ErrPlatform = errors.New("modelconfig: not an ONNX model")
	// ErrMismatch means a config disagrees with the model's graph (Check);
	// the message names the field and both sides.
	ErrMismatch = errors.New("modelconfig: config does not match the model")
	// ErrInvalid means a config field holds a value Triton refuses too
	// (a negative max_batch_size, an unknown execution accelerator), or
	// version_policy names a version that is not on disk.
	ErrInvalid = errors.New("modelconfig: invalid field")
)
