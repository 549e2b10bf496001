package serving

import "errors"

var (
	// ErrInvalidConfig is wrapped by Config.Validate and
	// UnitConfig.Validate; the message names the bad field.
	ErrInvalidConfig = errors.New("serving: invalid config")

	// ErrStopNow, as the cause of the ctx that ends Node.Run (see
	// context.WithCancelCause), stops at once: the engines close, so
	// in-flight requests go back to the queue for another worker or the
	// next start. It is what Ctrl-C and `cluster-serving stop` ask for.
	ErrStopNow = errors.New("serving: stop now")

	// ErrShutdown, as the cause of the ctx that ends Node.Run, drains:
	// the workers stop pulling and finish in-flight requests within
	// ShutdownGrace. It is what SIGTERM and `cluster-serving shutdown` ask
	// for. Any other end of ctx drains too, without the log line.
	ErrShutdown = errors.New("serving: shut down")

	// ErrModelConfig is wrapped by the errors of a model's config.pbtxt
	// that keep it from serving: a file that does not parse, a platform
	// other than ONNX, a version_policy naming versions not on disk, or
	// inputs and outputs that do not match the ONNX graph. The message
	// names the field at fault.
	ErrModelConfig = errors.New("serving: model config")
)
