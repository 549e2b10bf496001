package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
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
	tc, err := telemetryConfig(file, os.Getenv)
	if err != nil {
		return nil, nil, err
	}
	tc.ServiceVersion, tc.Output = version, stderr
	tel, err := telemetry.Setup(ctx, tc)
	if err != nil {
		return nil, nil, err
	}
	if tc.TracesExporter != telemetry.ExporterNone {
		tel.Logger().Info("exporting traces", "exporter", tc.TracesExporter, "endpoint", otlpEndpoint(tc, os.Getenv))
	}
	m, err := telemetry.NewMetrics(telemetry.Meter())
	if err != nil {
		_ = tel.Shutdown(ctx)
		return nil, nil, err
	}
	return tel, m, nil
}

// telemetryConfig maps file and the standard OTEL_* variables onto
// telemetry.Config. The key tracesExporter wins when it names an
// exporter; left empty or none (what `init` writes), the variables
// decide as the OTel specification says (telemetry.TracesExporterFromEnv):
// OTEL_EXPORTER_OTLP_ENDPOINT alone exports over OTLP, as it does for
// every other instrumented service, and OTEL_TRACES_EXPORTER=none turns
// that off.
func telemetryConfig(file *serving.File, getenv func(string) string) (telemetry.Config, error) {
	tc := file.Telemetry(getenv)
	if file.TracesExporter != "" && file.TracesExporter != telemetry.ExporterNone {
		return tc, nil
	}
	exporter, err := telemetry.TracesExporterFromEnv(getenv)
	if err != nil {
		return tc, fmt.Errorf("%w (or set the config key tracesExporter)", err)
	}
	tc.TracesExporter = exporter
	return tc, nil
}

// otlpEndpoint says where spans go, for the startup log line: the key
// otlpEndpoint, else the variable the exporter reads, with any password
// in the URL redacted.
func otlpEndpoint(tc telemetry.Config, getenv func(string) string) string {
	ep := cmp.Or(tc.OTLPEndpoint, getenv(telemetry.EnvOTLPTracesEndpoint), getenv(telemetry.EnvOTLPEndpoint))
	if u, err := url.Parse(ep); err == nil && u.User != nil {
		return u.Redacted()
	}
	if ep == "" {
		return "the exporter's default (localhost)"
	}
	return ep
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
