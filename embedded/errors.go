package embedded

import "errors"

var (
	// ErrInvalidConfig is wrapped by Config.Validate; the message names the bad field.
	ErrInvalidConfig = errors.New("embedded: invalid config")
	// ErrNotReady is returned by Start when the server did not accept
	// connections within the start timeout.
	ErrNotReady = errors.New("embedded: server not ready for connections")
)
