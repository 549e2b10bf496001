package infer

import (
	"errors"
	"fmt"

	"github.com/cluster-serving/cluster-serving/infer/status"
)

// Sentinel errors. Callers test them with errors.Is; most are wrapped with
// details.
var (
	// ErrNoModel means a model directory holds no .onnx file.
	ErrNoModel = errors.New("infer: no ONNX model found")
	// ErrManyModels means a model directory holds more than one .onnx file.
	ErrManyModels = errors.New("infer: more than one ONNX model found")
	// ErrUnsupportedFormat means a model directory holds another
	// framework's files; the wrapping message names the format and how to
	// export it to ONNX.
	ErrUnsupportedFormat = errors.New("infer: unsupported model format")
	// ErrNoLibrary means the ONNX Runtime shared library was not found.
	ErrNoLibrary = errors.New("infer: ONNX Runtime library not found; run `make ort`")
	// ErrNotInitialized means Init has not been called.
	ErrNotInitialized = errors.New("infer: ONNX Runtime not initialized; call infer.Init")
	// ErrInitMismatch means Init was called again with another library path.
	ErrInitMismatch = errors.New("infer: ONNX Runtime already initialized with another library")
	// ErrQueueFull means the batcher's bounded queue has no room; the caller
	// should retry later or shed load. Submitting never blocks. It
	// unwraps to status.ErrBusy (503).
	ErrQueueFull error = busyError("infer: queue full")
	// ErrClosed means the Engine or Batcher was closed; it unwraps to
	// status.ErrBusy (503).
	ErrClosed error = busyError("infer: closed")
	// ErrConfigValidation wraps every Config.Validate error.
	ErrConfigValidation = errors.New("infer: invalid config")
	// ErrUnsupportedDType means a model uses a tensor element type infer
	// does not handle.
	ErrUnsupportedDType = errors.New("infer: unsupported dtype")
	// ErrNoBatchDim means a rank-0 (scalar) tensor was asked to stack or
	// split along dim 0, which it does not have.
	ErrNoBatchDim = errors.New("infer: scalar tensor has no batch dim")
	// ErrNoInputs means a model without inputs was asked to run: ONNX
	// Runtime's Go binding cannot run a graph with none.
	ErrNoInputs = errors.New("infer: model has no inputs")
	// ErrNoSecret means DeriveKey got an empty secret or salt.
	ErrNoSecret = errors.New("infer: encryption needs a secret and a salt")
	// ErrDecrypt means encrypted data (a record's image, a model file) did
	// not decrypt: wrong secret or salt, tampered, or not encrypted the
	// original's way. The wrapping message never holds the secret.
	ErrDecrypt = errors.New("infer: decrypt")
	// ErrExecutionProvider means the ONNX Runtime library in use lacks the
	// configured execution provider (Config.ExecutionProvider), or cannot
	// load it; the wrapping message names what the library offers.
	ErrExecutionProvider = errors.New("infer: execution provider not available")
	// ErrBatching means Config.Batching "on" was asked of a model whose
	// inputs cannot be stacked along dim 0; the message names the input.
	ErrBatching = errors.New("infer: model cannot batch")
	// ErrImageBudget means an image could not get its share of the image
	// memory budget (imageMemoryBudget) within a short wait, as other
	// images were decoding: status 503, a transient failure that a retry
	// may pass. Its text is the one callers read, hence no "infer:".
	ErrImageBudget error = busyError("busy: image decode memory budget")
)

// busyError is a sentinel of status 503: errors.Is(err, status.ErrBusy)
// holds for it.
type busyError string

func (e busyError) Error() string { return string(e) }
func (e busyError) Unwrap() error { return status.ErrBusy }

// InputError is a bad request: the payload does not fit the model.
// It unwraps to status.ErrBadInput, so status.Of maps it to 400, so doors answer 400 / NaN and the worker
// terminates the record. Instance is -1 when the error is not about one
// instance; Input is empty when it is not about one input.
type InputError struct {
	Instance int    // index of the instance (record) in the request, or -1
	Input    string // model input name, or ""
	Msg      string // what is wrong, with got vs want
}

// Unwrap returns status.ErrBadInput: a bad request is status 400.
func (e *InputError) Unwrap() error { return status.ErrBadInput }

func (e *InputError) Error() string {
	switch {
	case e.Instance >= 0 && e.Input != "":
		return fmt.Sprintf("instance %d: input %q: %s", e.Instance, e.Input, e.Msg)
	case e.Instance >= 0:
		return fmt.Sprintf("instance %d: %s", e.Instance, e.Msg)
	case e.Input != "":
		return fmt.Sprintf("input %q: %s", e.Input, e.Msg)
	default:
		return e.Msg
	}
}

// NewInputError returns the *InputError of instance (-1 for none) and
// input ("" for none) with the formatted message. Codecs build their
// errors with it.
func NewInputError(instance int, input, format string, args ...any) *InputError {
	return &InputError{Instance: instance, Input: input, Msg: fmt.Sprintf(format, args...)}
}
