package mesh

import (
	"errors"
	"fmt"
	"time"

	"github.com/cluster-serving/cluster-serving/infer/status"
)

var (
	// ErrInvalidConfig is wrapped by every Validate; the message names the bad field.
	ErrInvalidConfig = errors.New("mesh: invalid config")
	// ErrInvalidJob is returned for a job name that does not match ^[A-Za-z0-9_-]+$.
	ErrInvalidJob = errors.New("mesh: invalid job name")
	// ErrQueueFull is returned when the work queue rejected a request
	// because it reached its MaxMsgs or MaxBytes limit (DiscardNew). It
	// wraps status.ErrBusy: a door answers 503.
	ErrQueueFull error = &wireError{"mesh: queue full", status.ErrBusy}
	// ErrMaxQueueSize is the ErrQueueFull of a priority level's queue at
	// its model's max_queue_size (schedule.go); Triton's words.
	ErrMaxQueueSize error = &wireError{"mesh: Exceeds maximum queue size", ErrQueueFull}
	// ErrNoStorage is returned when the NATS servers have no storage left
	// for the work queue (a full disk, or JetStream's max_file reached:
	// API errors 10047 and 10023): nothing was stored. It wraps status.ErrBusy: a
	// door answers 503 at once, rather than after the caller's deadline,
	// and serving resumes by itself once space comes back.
	ErrNoStorage error = &wireError{"mesh: NATS servers out of storage", status.ErrBusy}
	// ErrDuplicate is returned by Client.Submit when the work queue already
	// held a request with the same MsgID: the answer went to the first caller.
	ErrDuplicate = errors.New("mesh: duplicate request id")
	// ErrClosed is returned by a Client after Close. It wraps status.ErrBusy:
	// a door answers 503.
	ErrClosed error = &wireError{"mesh: client closed", status.ErrBusy}
	// ErrUnavailable is returned when no partition of a job's work queue
	// (or results) stored a message before the caller's deadline: stream
	// leaders being elected, NATS unreachable, a server whose disk is full
	// (nats-server does not answer a write its store failed). It wraps
	// status.ErrBusy: a
	// door answers 503 and the caller may retry.
	ErrUnavailable error = &wireError{"mesh: work queue unavailable", status.ErrBusy}
)

// wireError is a sentinel of mesh that is also one of wire's: it reads as
// mesh's own, and errors.Is (so status.Of) finds the status sentinel.
type wireError struct {
	msg  string
	wire error
}

func (e *wireError) Error() string { return e.msg }
func (e *wireError) Unwrap() error { return e.wire }

// Limit is one config value that must not be negative, under the name the
// error shows: an int, int64, float64 or time.Duration.
type Limit struct {
	Name  string
	Value any
}

// CheckLimits returns an error wrapping invalid that names the first limit
// whose value is negative ("MaxInflight -1 negative"), or nil. The mesh's
// and the doors' Validate methods share it, so every such message reads
// the same.
func CheckLimits(invalid error, limits ...Limit) error {
	for _, l := range limits {
		if negative(l.Value) {
			return fmt.Errorf("%w: %s %v negative", invalid, l.Name, l.Value)
		}
	}
	return nil
}

func negative(v any) bool {
	switch x := v.(type) {
	case int:
		return x < 0
	case int64:
		return x < 0
	case float64:
		return x < 0
	case time.Duration:
		return x < 0
	}
	return false
}
