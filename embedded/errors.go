package embedded

import (
	"errors"
	"net"
)

var (
	// ErrInvalidConfig is wrapped by Config.Validate; the message names the bad field.
	ErrInvalidConfig = errors.New("embedded: invalid config")
	// ErrNotReady is returned by Start when the server did not accept
	// connections within the start timeout.
	ErrNotReady = errors.New("embedded: server not ready for connections")
)

// ListenError is returned by Start when the client address cannot be
// bound: most often another process (a nats-server, another
// cluster-serving) holds the port, and errors.Is(err, syscall.EADDRINUSE)
// holds. Addr is host:port as configured, so that the caller can name
// its own config key.
type ListenError struct {
	Addr string
	Err  error // from net.Listen
}

func (e *ListenError) Error() string {
	// net.Listen says "listen tcp ADDR: bind: address already in use";
	// the syscall's own words are enough after the address.
	cause := e.Err
	var sys interface{ Unwrap() error }
	var op *net.OpError
	if errors.As(cause, &op) && errors.As(op.Err, &sys) {
		cause = sys.Unwrap()
	}
	return "embedded: listen " + e.Addr + ": " + cause.Error()
}

func (e *ListenError) Unwrap() error { return e.Err }
