package main

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	"github.com/cluster-serving/cluster-serving/embedded"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

// listenAddr is one address a serving process listens on, with the config
// key that sets it and what else is likely to hold it.
type listenAddr struct {
	key, addr, usual string
}

// listeners are the addresses the process must bind to serve: the
// embedded NATS server of `start` (when natsUrl is empty), and the HTTP
// and gRPC doors of `start` and `http`. metricsListen is not among them: a metrics
// port in use is logged, not fatal (see serveMetrics).
func (p *process) listeners() []listenAddr {
	var out []listenAddr
	if p.role == "start" && p.file.NatsURL == "" {
		out = append(out, natsListen(p.file))
	}
	if (p.role == "start" || p.role == "http") && httpOn(p.file) {
		out = append(out, httpListen(p.file))
	}
	if (p.role == "start" || p.role == "http") && grpcOn(p.file) {
		out = append(out, grpcListen(p.file))
	}
	if (p.role == "start" || p.role == "http") && p.file.RESPListen != "" {
		out = append(out, respListen(p.file))
	}
	return out
}

func natsListen(file *serving.File) listenAddr {
	c := file.Embedded()
	addr := net.JoinHostPort(cmp.Or(c.Host, embedded.DefaultHost), strconv.Itoa(cmp.Or(c.Port, embedded.DefaultPort)))
	return listenAddr{"natsListen", addr, "nats-server"}
}

func httpListen(file *serving.File) listenAddr {
	return listenAddr{"httpPort", httpAddr(file), "HTTP server"}
}

func metricsListen(file *serving.File) listenAddr {
	return listenAddr{"metricsListen", file.MetricsAddr(), "Prometheus exporter"}
}

// checkListeners binds each of the process's addresses and lets it go
// again, before the models load, so that a port in use fails the command
// at once with the key to change (a model can take a minute to load).
// The door or server binds for real later; a port taken in between fails
// there, with the same message (see listenError). For the embedded server
// it first reads natsServerConfig and refuses an anonymous listener
// beyond loopback, also before any model loads (see nodeError).
func (p *process) checkListeners() error {
	if p.role == "start" && p.file.NatsURL == "" {
		if err := embedded.Check(p.file.Embedded()); err != nil {
			return nodeError(p.file, err)
		}
	}
	if (p.role == "start" || p.role == "http") && (httpOn(p.file) || grpcOn(p.file)) {
		if err := httpConfig(p.file, nil).CheckFiles(); err != nil {
			return door.KeyError(err)
		}
	}
	for _, l := range p.listeners() {
		ln, err := net.Listen("tcp", l.addr)
		if err != nil {
			return l.error(err)
		}
		ln.Close()
	}
	return nil
}

// error says which config key's address could not be bound, e.g.
// "natsListen 127.0.0.1:4222: address already in use (another
// cluster-serving or nats-server?)", and what to do.
func (l listenAddr) error(err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%s %s: address already in use (another cluster-serving or %s?): stop it, or set %s to a free address",
			l.key, l.addr, l.usual, l.key)
	}
	return fmt.Errorf("%s %s: %w", l.key, l.addr, err)
}

// nodeError names the config keys behind an embedded server's error:
// natsListen when it could not bind its port (taken after
// checkListeners ran), natsListen and natsServerConfig when it would
// listen beyond loopback without authentication, natsServerConfig when
// nats-server refused that file. Other errors pass unchanged.
func nodeError(file *serving.File, err error) error {
	var le *embedded.ListenError
	var ae *embedded.AnonymousError
	switch {
	case errors.As(err, &le):
		return natsListen(file).error(le.Err)
	case errors.As(err, &ae):
		return fmt.Errorf("natsListen %s is reachable beyond this machine and the embedded NATS server has no authentication: "+
			"set natsServerConfig to a nats-server config with an authorization block (or natsAllowAnonymous: true)", ae.Addr)
	case errors.Is(err, embedded.ErrInvalidConfig) && file.NatsServerConfig != "":
		return fmt.Errorf("config key \"natsServerConfig\": %w", err)
	}
	return err
}
