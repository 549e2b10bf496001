package wire

import (
	"context"
	"errors"
	"fmt"

	"github.com/cluster-serving/cluster-serving/infer"
)

// Statuses of an answer, HTTP's codes, shared by every door and the mesh:
// a worker sends one with each result (mesh.HeaderStatus), the HTTP door
// answers with it, the NATS door sends it as the micro error code.
const (
	StatusOK              = 200
	StatusBadInput        = 400 // the request is at fault; retrying cannot help
	StatusNotFound        = 404 // no such model, version or route
	StatusTooLarge        = 413 // the body is larger than a door or NATS takes
	StatusTooManyRequests = 429 // a door's token bucket had no token in time
	StatusClientClosed    = 499 // the caller went away (nginx's code)
	StatusInternal        = 500 // anything else; retried by the worker first
	StatusBusy            = 503 // a bounded queue was full, or shutting down
	StatusTimeout         = 504 // the deadline passed before an answer
)

// Sentinel errors, one per failing status but 499 and 500. Doors and the
// mesh wrap them (mesh.ErrQueueFull wraps ErrBusy); an *Error unwraps to
// the one of its status. Callers test them with errors.Is, or map any
// error to its status with Status.
var (
	// ErrBadInput means the request itself is wrong: status 400.
	ErrBadInput = errors.New("wire: bad input")
	// ErrNotFound means the request names a model, version or route that
	// is not served: status 404.
	ErrNotFound = errors.New("wire: not found")
	// ErrTooLarge means the request is larger than a door or NATS takes:
	// status 413. It can never be served; do not retry it.
	ErrTooLarge = errors.New("wire: too large")
	// ErrTooManyRequests means a door's rate limit refused the request:
	// status 429.
	ErrTooManyRequests = errors.New("wire: too many requests")
	// ErrBusy means a bounded queue was full or a part is shutting down:
	// status 503. Retrying later may succeed.
	ErrBusy = errors.New("wire: busy")
	// ErrTimeout means the deadline passed before an answer: status 504.
	ErrTimeout = errors.New("wire: timeout")
	// ErrUnanswerable means the model ran but a codec cannot write its
	// outputs in the request's format: status 500, and the same on every
	// try, so a worker answers it at once instead of retrying it.
	ErrUnanswerable = errors.New("wire: outputs cannot be written in the request's format")
)

// unanswerable is an Encode failure of status 500: it reads as the
// codec's error and unwraps to it and to ErrUnanswerable.
type unanswerable struct{ err error }

func (u unanswerable) Error() string   { return u.err.Error() }
func (u unanswerable) Unwrap() []error { return []error{u.err, ErrUnanswerable} }

// Error is a non-200 answer: its status and message, as a worker sends
// them across the mesh (mesh.Result.Err returns one) or a door decides
// them itself. Unwrap returns the sentinel of its status, so that
// errors.Is(err, ErrBusy) holds for a 503 answer.
type Error struct {
	// Status is the answer's status, one of the Status* codes.
	Status int
	// Message says what went wrong, for the caller.
	Message string
}

// Errorf returns the *Error of status with the formatted message.
func Errorf(status int, format string, args ...any) *Error {
	return &Error{Status: status, Message: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string { return fmt.Sprintf("status %d: %s", e.Status, e.Message) }

// Unwrap returns the sentinel of e.Status (ErrBadInput for 400, ...), or
// nil for a status without one.
func (e *Error) Unwrap() error {
	switch e.Status {
	case StatusBadInput:
		return ErrBadInput
	case StatusNotFound:
		return ErrNotFound
	case StatusTooLarge:
		return ErrTooLarge
	case StatusTooManyRequests:
		return ErrTooManyRequests
	case StatusBusy:
		return ErrBusy
	case StatusTimeout:
		return ErrTimeout
	}
	return nil
}

// Status maps err to the status of its answer: StatusOK for nil; an
// *Error's own Status; the sentinels' codes; StatusBadInput for an
// *infer.InputError; StatusBusy for infer.ErrQueueFull, infer.ErrClosed
// and infer.ErrImageBudget; StatusTimeout for context.DeadlineExceeded;
// StatusClientClosed for context.Canceled; StatusInternal for anything
// else. Every door and the worker decide with it.
func Status(err error) int {
	if err == nil {
		return StatusOK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	var ie *infer.InputError
	switch {
	case errors.As(err, &ie), errors.Is(err, ErrBadInput):
		return StatusBadInput
	case errors.Is(err, ErrNotFound):
		return StatusNotFound
	case errors.Is(err, ErrTooLarge):
		return StatusTooLarge
	case errors.Is(err, ErrTooManyRequests):
		return StatusTooManyRequests
	case errors.Is(err, ErrBusy), errors.Is(err, infer.ErrQueueFull), errors.Is(err, infer.ErrClosed),
		errors.Is(err, infer.ErrImageBudget):
		return StatusBusy
	case errors.Is(err, ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return StatusTimeout
	case errors.Is(err, context.Canceled):
		return StatusClientClosed
	}
	return StatusInternal
}
