package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// telemetryConfig maps config.yaml and the standard OTEL_* variables onto
// telemetry.Config. Config keys win; OTEL_TRACES_EXPORTER=otlp (with
// OTEL_EXPORTER_OTLP_PROTOCOL) and OTEL_TRACES_SAMPLER_ARG apply when the
// keys are left at their defaults. The OTLP exporters read the other
// OTEL_EXPORTER_OTLP_* variables themselves.
func telemetryConfig(cfg *Config) telemetry.Config {
	exporter := cfg.TracesExporter
	if exporter == "none" {
		switch os.Getenv("OTEL_TRACES_EXPORTER") {
		case "otlp":
			exporter = "otlp-grpc"
			if p := os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL"); strings.HasPrefix(p, "http") {
				exporter = "otlp-http"
			}
		}
	}
	ratio := cfg.TraceSampleRatio
	if ratio == 0 {
		if r, err := strconv.ParseFloat(os.Getenv("OTEL_TRACES_SAMPLER_ARG"), 64); err == nil && r > 0 && r <= 1 {
			ratio = r
		}
	}
	name := os.Getenv("OTEL_SERVICE_NAME")
	return telemetry.Config{
		ServiceName:    name,
		ServiceVersion: version,
		TracesExporter: exporter,
		OTLPEndpoint:   cfg.OtlpEndpoint,
		OTLPInsecure:   cfg.OtlpInsecure,
		SampleRatio:    ratio,
		MetricsEnabled: cfg.MetricsListen != "off",
		LogFormat:      cfg.LogFormat,
		LogLevel:       cfg.LogLevel,
		Output:         os.Stderr,
	}
}

// setupTelemetry installs the OTel SDK for this process and builds the
// instruments. The caller shuts tel down last.
func setupTelemetry(ctx context.Context, cfg *Config) (*telemetry.Telemetry, *telemetry.Metrics, error) {
	tel, err := telemetry.Setup(ctx, telemetryConfig(cfg))
	if err != nil {
		return nil, nil, err
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
func serveMetrics(ctx context.Context, g *errgroup.Group, cfg *Config, tel *telemetry.Telemetry, log *slog.Logger) {
	if cfg.MetricsListen == "off" {
		return
	}
	ln, err := net.Listen("tcp", cfg.MetricsListen)
	if err != nil {
		log.Warn("Prometheus metrics not served: set metricsListen to a free address", "metricsListen", cfg.MetricsListen, "err", err)
		return
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", tel.MetricsHandler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Info("Prometheus metrics", "url", "http://"+ln.Addr().String()+"/metrics")
	g.Go(func() error {
		err := srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	})
	g.Go(func() error {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	})
}

// engineHooks feeds an engine's stage times and batch sizes to metrics.
func engineHooks(m *telemetry.Metrics, job, model string) infer.Hooks {
	return infer.Hooks{
		Stage: func(ctx context.Context, stage string, d time.Duration) {
			m.RecordStage(ctx, stage, job, model, d)
		},
		Batch: func(items, rows int) {
			m.RecordBatch(context.Background(), job, model, items)
		},
	}
}

// observeQueues reports the work queues' depth at each scrape: messages
// waiting (pending) and delivered but not yet acknowledged (ack pending),
// per job, from the shared consumer's info. These are the gauges to
// autoscale workers on.
func observeQueues(m *telemetry.Metrics, js jetstream.JetStream, jobs []string) error {
	_, err := m.ObserveQueues(func(ctx context.Context) ([]telemetry.QueueDepth, error) {
		out := make([]telemetry.QueueDepth, 0, len(jobs))
		for _, job := range jobs {
			c, err := js.Consumer(ctx, mesh.StreamName(job), mesh.WorkersConsumer)
			if err != nil {
				return nil, err
			}
			info, err := c.Info(ctx)
			if err != nil {
				return nil, err
			}
			out = append(out, telemetry.QueueDepth{Job: job, Pending: int64(info.NumPending), AckPending: int64(info.NumAckPending)})
		}
		return out, nil
	})
	return err
}
