package telemetry

import "errors"

var (
	// ErrInvalidConfig is wrapped by Config.Validate and Setup; the message
	// names the bad field.
	ErrInvalidConfig = errors.New("telemetry: invalid config")
)
