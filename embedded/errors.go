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
	// ErrAnonymous is wrapped by the *AnonymousError of Start and Check.
	ErrAnonymous = errors.New("embedded: reachable beyond this machine without authentication")
)

// AnonymousError is returned by Start and Check when the client listener
// binds an address other machines can reach (anything but 127.0.0.0/8,
// ::1 and localhost; 0.0.0.0 and "" included) while the server has no
// authentication: no users, nkeys, token, operator, auth callout or
// verified client certificates in ConfigFile, and AllowAnonymous is
// false. Addr is host:port as configured, so that the caller can name its
// own config keys. errors.Is(err, ErrAnonymous) holds.
type AnonymousError struct {
	Addr string
}

func (e *AnonymousError) Error() string {
	return "embedded: listen " + e.Addr + " is reachable beyond this machine and the server has no authentication: " +
		"give it a nats-server config with an authorization block (ConfigFile), or set AllowAnonymous"
}

func (e *AnonymousError) Unwrap() error { return ErrAnonymous }

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
