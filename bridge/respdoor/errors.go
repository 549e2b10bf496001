package respdoor

import "errors"

// ErrInvalidConfig is wrapped by Config.Validate; the message names the bad field.
var ErrInvalidConfig = errors.New("respdoor: invalid config")
