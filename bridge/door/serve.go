package door

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"
)

// Server is what Serve runs: *http.Server, or a gRPC server adapted.
// Serve blocks until the server stops; Shutdown stops it gently,
// returning ctx's error when requests are still in flight as ctx ends;
// Close cuts what is left.
type Server interface {
	Serve(net.Listener) error
	Shutdown(ctx context.Context) error
	Close() error
}

// Serve serves srv on ln until ctx ends, then shuts it down: requests in
// flight may finish within grace, and what is left is cut. name ("HTTP
// door") heads its log lines, and attrs follow the address in its
// "listening" line. It returns an error only when serving fails.
func Serve(ctx context.Context, srv Server, ln net.Listener, name string, grace time.Duration, log *slog.Logger, attrs ...any) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info(name+" listening", append([]any{"addr", ln.Addr().String()}, attrs...)...)
	select {
	case err := <-errc:
		return fmt.Errorf("%s: serve: %w", name, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn(name+": requests still in flight at the end of the grace period", "err", err)
		_ = srv.Close()
	}
	<-errc // http.ErrServerClosed, or nil from gRPC
	return nil
}

// Run listens on addr and serves there with serve (a door's Serve) until
// ctx ends.
func Run(ctx context.Context, addr string, serve func(context.Context, net.Listener) error) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("door: listen: %w", err)
	}
	return serve(ctx, ln)
}
