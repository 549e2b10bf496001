package mesh

import (
	"errors"

	"github.com/cluster-serving/cluster-serving/infer/wire"
)

var (
	// ErrInvalidConfig is wrapped by every Validate; the message names the bad field.
	ErrInvalidConfig = errors.New("mesh: invalid config")
	// ErrInvalidJob is returned for a job name that does not match ^[A-Za-z0-9_-]+$.
	ErrInvalidJob = errors.New("mesh: invalid job name")
	// ErrQueueFull is returned when the work queue rejected a request
	// because it reached its MaxMsgs or MaxBytes limit (DiscardNew). It
	// wraps wire.ErrBusy: a door answers 503.
	ErrQueueFull error = &wireError{"mesh: queue full", wire.ErrBusy}
	// ErrDuplicate is returned by Client.Submit when the work queue already
	// held a request with the same MsgID: the answer went to the first caller.
	ErrDuplicate = errors.New("mesh: duplicate request id")
	// ErrClosed is returned by a Client after Close. It wraps wire.ErrBusy:
	// a door answers 503.
	ErrClosed error = &wireError{"mesh: client closed", wire.ErrBusy}
)

// wireError is a sentinel of mesh that is also one of wire's: it reads as
// mesh's own, and errors.Is (so wire.Status) finds the wire sentinel.
type wireError struct {
	msg  string
	wire error
}

func (e *wireError) Error() string { return e.msg }
func (e *wireError) Unwrap() error { return e.wire }
