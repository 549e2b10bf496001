package mesh

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalidConfig is wrapped by every Validate; the message names the bad field.
	ErrInvalidConfig = errors.New("mesh: invalid config")
	// ErrInvalidJob is returned for a job name that does not match ^[A-Za-z0-9_-]+$.
	ErrInvalidJob = errors.New("mesh: invalid job name")
	// ErrQueueFull is returned when the work queue rejected a request
	// because it reached its MaxMsgs or MaxBytes limit (DiscardNew).
	ErrQueueFull = errors.New("mesh: queue full")
	// ErrDuplicate is returned by Client.Submit when the work queue already
	// held a request with the same MsgID: the answer went to the first caller.
	ErrDuplicate = errors.New("mesh: duplicate request id")
	// ErrClosed is returned by a Client after Close.
	ErrClosed = errors.New("mesh: client closed")
)

// Error is a non-200 result: the status a worker or the service gave and
// its message. Doors map it to their wire format with errors.As.
//
// Status is one of StatusBadInput (400), StatusInternal (500),
// StatusBusy (503) or StatusTimeout (504).
type Error struct {
	Status  int
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("mesh: status %d: %s", e.Status, e.Message) }

// BadInput reports whether the request itself was at fault (status 400).
func (e *Error) BadInput() bool { return e.Status == StatusBadInput }

// Temporary reports whether retrying later may succeed (503 and 504).
func (e *Error) Temporary() bool { return e.Status == StatusBusy || e.Status == StatusTimeout }

// badInput reports whether err says the payload is at fault. infer's
// *InputError implements BadInput() bool.
func badInput(err error) bool {
	var b interface{ BadInput() bool }
	return errors.As(err, &b) && b.BadInput()
}

// temporary reports whether err says the predictor was busy.
func temporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}
