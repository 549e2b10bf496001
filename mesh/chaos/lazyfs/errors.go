package lazyfs

import "errors"

var (
	// ErrNoFUSE wraps every failure of the mount itself (no /dev/fuse, no
	// permission to mount, no fusermount): a missing kernel feature, not a
	// bug, so tests skip on it.
	ErrNoFUSE = errors.New("lazyfs: cannot mount a FUSE file system here")
	// ErrInvalidOptions is wrapped by Options.Validate; the message names
	// the bad field.
	ErrInvalidOptions = errors.New("lazyfs: invalid options")
)
