package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/cluster-serving/cluster-serving/mesh/serving"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// setupTelemetry installs the OTel SDK for this process, configured by
// file and the standard OTEL_* variables, with its logger writing to
// stderr, and builds the instruments. The caller shuts tel down last.
func setupTelemetry(ctx context.Context, file *serving.File, stderr io.Writer) (*telemetry.Telemetry, *telemetry.Metrics, error) {
	tc, err := file.TelemetryFromEnv(os.Getenv)
	if err != nil {
		return nil, nil, err
	}
	tc.ServiceVersion, tc.Output = version, stderr
	tel, err := telemetry.Setup(ctx, tc)
	if err != nil {
		return nil, nil, err
	}
	if tc.TracesExporter != telemetry.ExporterNone {
		tel.Logger().Info("exporting traces", "exporter", tc.TracesExporter, "endpoint", telemetry.TracesEndpoint(tc, os.Getenv))
	}
	m, err := telemetry.NewMetrics(telemetry.Meter())
	if err != nil {
		_ = tel.Shutdown(ctx)
		return nil, nil, err
	}
	return tel, m, nil
}

// shutdownTelemetry flushes spans and metrics, within 5 seconds.
func shutdownTelemetry(tel *telemetry.Telemetry, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tel.Shutdown(ctx); err != nil {
		log.Warn("telemetry flush", "err", err)
	}
}

// serveMetrics serves Prometheus metrics on metricsListen until ctx ends.
// A port already taken (a second process on the machine) is logged, not
// fatal: serving matters more than its metrics.
func serveMetrics(ctx context.Context, g *errgroup.Group, file *serving.File, tel *telemetry.Telemetry, log *slog.Logger) {
	addr := file.MetricsAddr()
	if addr == "" {
		return
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Warn("Prometheus metrics not served", "err", metricsListen(file).error(err))
		return
	}
	log.Info("Prometheus metrics", "url", "http://"+ln.Addr().String()+"/metrics")
	g.Go(func() error { return tel.ServeMetrics(ctx, ln) })
}
