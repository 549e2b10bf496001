package telemetry

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// metricsShutdownTimeout bounds the scrapes ServeMetrics lets finish.
const metricsShutdownTimeout = 5 * time.Second

// ServeMetrics serves MetricsHandler at GET /metrics on ln until ctx ends,
// then shuts the server down, letting scrapes in flight finish within 5
// seconds. It blocks, owns and closes ln, and returns nil once ctx ended,
// or the error that stopped serving before.
func (t *Telemetry) ServeMetrics(ctx context.Context, ln net.Listener) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", t.MetricsHandler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), metricsShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}
