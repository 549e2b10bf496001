// Package status is the taxonomy of answers every package shares: the
// statuses (HTTP's codes), their sentinel errors, the *Error a worker
// sends across the mesh or a door decides itself, and Of, which maps any
// error to its status. It depends on nothing of ours, so that the mesh
// and the doors decide statuses without linking a codec.
package status

import (
	"context"
	"errors"
	"fmt"
)

// Statuses of an answer, HTTP's codes, shared by every door and the mesh:
// a worker sends one with each result (mesh.HeaderStatus), the HTTP door
// answers with it, the NATS door sends it as the micro error code.
const (
	OK              = 200
	BadInput        = 400 // the request is at fault; retrying cannot help
	Forbidden       = 403 // the credentials do not allow it
	NotFound        = 404 // no such model, version or route
	TooLarge        = 413 // the body is larger than a door or NATS takes
	TooManyRequests = 429 // a door's token bucket had no token in time
	ClientClosed    = 499 // the caller went away (nginx's code)
	Internal        = 500 // anything else; retried by the worker first
	Busy            = 503 // a bounded queue was full, or shutting down
	Timeout         = 504 // the deadline passed before an answer
)

// Sentinel errors, one per failing status but 499 and 500. Doors and the
// mesh wrap them (mesh.ErrQueueFull wraps ErrBusy); an *Error unwraps to
// the one of its status. Callers test them with errors.Is, or map any
// error to its status with Of.
var (
	// ErrBadInput means the request itself is wrong: status 400.
	// infer.InputError unwraps to it.
	ErrBadInput = errors.New("status: bad input")
	// ErrForbidden means the caller's credentials do not allow the
	// request (an inference token on an admin route): status 403.
	ErrForbidden = errors.New("status: forbidden")
	// ErrNotFound means the request names a model, version or route that
	// is not served: status 404.
	ErrNotFound = errors.New("status: not found")
	// ErrTooLarge means the request is larger than a door or NATS takes:
	// status 413. It can never be served; do not retry it.
	ErrTooLarge = errors.New("status: too large")
	// ErrTooManyRequests means a door's rate limit refused the request:
	// status 429.
	ErrTooManyRequests = errors.New("status: too many requests")
	// ErrBusy means a bounded queue was full or a part is shutting down:
	// status 503. Retrying later may succeed. infer.ErrQueueFull and
	// infer.ErrClosed unwrap to it.
	ErrBusy = errors.New("status: busy")
	// ErrTimeout means the deadline passed before an answer: status 504.
	ErrTimeout = errors.New("status: timeout")
	// ErrUnanswerable means the model ran but a codec cannot write its
	// outputs in the request's format: status 500, and the same on every
	// try, so a worker answers it at once instead of retrying it.
	ErrUnanswerable = errors.New("status: outputs cannot be written in the request's format")
)

// Error is a non-200 answer: its status and message, as a worker sends
// them across the mesh (mesh.Result.Err returns one) or a door decides
// them itself. Unwrap returns the sentinel of its status, so that
// errors.Is(err, ErrBusy) holds for a 503 answer.
type Error struct {
	// Status is the answer's status, one of the codes above.
	Status int
	// Message says what went wrong, for the caller.
	Message string
}

// Errorf returns the *Error of status with the formatted message.
func Errorf(status int, format string, args ...any) *Error {
	return &Error{Status: status, Message: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string { return fmt.Sprintf("status %d: %s", e.Status, e.Message) }

// sentinels pairs each status with its sentinel error, in the order Of
// tries them: an error that wraps two gets the first one's status.
var sentinels = []struct {
	status int
	err    error
}{
	{BadInput, ErrBadInput},
	{Forbidden, ErrForbidden},
	{NotFound, ErrNotFound},
	{TooLarge, ErrTooLarge},
	{TooManyRequests, ErrTooManyRequests},
	{Busy, ErrBusy},
	{Timeout, ErrTimeout},
}

// Unwrap returns the sentinel of e.Status (ErrBadInput for 400, ...), or
// nil for a status without one.
func (e *Error) Unwrap() error {
	for _, s := range sentinels {
		if s.status == e.Status {
			return s.err
		}
	}
	return nil
}

// Of maps err to the status of its answer: OK for nil; an *Error's own
// Status; the sentinels' codes (errors that unwrap to one, such as
// infer.InputError, included); Timeout for context.DeadlineExceeded;
// ClientClosed for context.Canceled; Internal for anything else. Every
// door and the worker decide with it.
func Of(err error) int {
	if err == nil {
		return OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			return s.status
		}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return Timeout
	case errors.Is(err, context.Canceled):
		return ClientClosed
	}
	return Internal
}
