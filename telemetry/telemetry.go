package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope for every tracer and meter of
// this project: otel.Tracer(telemetry.ScopeName), otel.Meter(ScopeName).
const ScopeName = "github.com/cluster-serving/cluster-serving"

// Telemetry owns the OTel SDK providers that Setup installed globally, the
// Prometheus registry behind MetricsHandler and the process logger. Its
// methods are safe for concurrent use.
type Telemetry struct {
	logger   *slog.Logger
	tp       *sdktrace.TracerProvider // nil when TracesExporter is none
	mp       *sdkmetric.MeterProvider // nil when metrics are disabled
	registry *prometheus.Registry     // nil when metrics are disabled
	memory   *tracetest.InMemoryExporter

	once        sync.Once
	shutdownErr error
}

// Setup validates cfg, builds the logger and installs, as the OTel globals,
// the tracer provider (unless TracesExporter is none; with the stage
// spans only at TraceDetailStages, see WithTraceDetail), the meter provider
// (when MetricsEnabled) and the W3C TraceContext+Baggage propagator. It
// also routes OTel's internal errors (failed exports) to the logger.
//
// The caller must call Shutdown to flush spans. Setup does not connect to
// the OTLP endpoint: an unreachable collector shows up later as logged
// export errors, never as a failed Setup. It returns ErrInvalidConfig or an
// exporter construction error.
func Setup(ctx context.Context, cfg Config) (*Telemetry, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	t := &Telemetry{logger: newLogger(cfg)}

	res, err := newResource(cfg)
	if err != nil {
		return nil, err
	}

	if err := t.setupTraces(ctx, cfg, res); err != nil {
		return nil, err
	}
	if err := t.setupMetrics(cfg, res); err != nil {
		_ = t.Shutdown(ctx)
		return nil, err
	}
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(
		propagation.TraceContext{}, propagation.Baggage{}))
	logger := t.logger
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("opentelemetry", "err", err)
	}))
	return t, nil
}

func newResource(cfg Config) (*resource.Resource, error) {
	attrs := []attribute.KeyValue{attribute.String("service.name", cfg.ServiceName)}
	if cfg.ServiceVersion != "" {
		attrs = append(attrs, attribute.String("service.version", cfg.ServiceVersion))
	}
	// resource.Default carries the SDK's telemetry.sdk.* attributes and the
	// SDK's own OTEL_RESOURCE_ATTRIBUTES handling; our explicit service
	// attributes are merged last so they win.
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attrs...))
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	return res, nil
}

func (t *Telemetry) setupTraces(ctx context.Context, cfg Config, res *resource.Resource) error {
	var spanProcessor sdktrace.TracerProviderOption
	switch cfg.TracesExporter {
	case ExporterNone:
		// No SDK at all: a no-op tracer costs a few ns per span and still
		// carries an incoming parent's span context to the next hop.
		otel.SetTracerProvider(tracenoop.NewTracerProvider())
		return nil
	case ExporterMemory:
		t.memory = tracetest.NewInMemoryExporter()
		spanProcessor = sdktrace.WithSyncer(t.memory)
	case ExporterOTLPGRPC, ExporterOTLPHTTP:
		exp, err := otlpExporter(ctx, cfg)
		if err != nil {
			return err
		}
		spanProcessor = sdktrace.WithBatcher(exp)
	}
	t.tp = sdktrace.NewTracerProvider(
		spanProcessor,
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))),
	)
	otel.SetTracerProvider(WithTraceDetail(t.tp, cfg.TraceDetail))
	return nil
}

// otlpExporter is the OTLP span exporter cfg.TracesExporter names.
func otlpExporter(ctx context.Context, cfg Config) (sdktrace.SpanExporter, error) {
	var exp sdktrace.SpanExporter
	var err error
	if cfg.TracesExporter == ExporterOTLPGRPC {
		exp, err = otlptracegrpc.New(ctx, otlpOptions(cfg,
			otlptracegrpc.WithEndpointURL, otlptracegrpc.WithEndpoint, otlptracegrpc.WithInsecure)...)
	} else {
		exp, err = otlptracehttp.New(ctx, otlpOptions(cfg,
			otlptracehttp.WithEndpointURL, otlptracehttp.WithEndpoint, otlptracehttp.WithInsecure)...)
	}
	if err != nil {
		return nil, fmt.Errorf("telemetry: %s exporter: %w", cfg.TracesExporter, err)
	}
	return exp, nil
}

// otlpOptions are one OTLP exporter's options (gRPC or HTTP, the same
// three constructors in each package) from cfg: OTLPEndpoint as a URL when
// it has a scheme, else as host:port, and OTLPInsecure.
func otlpOptions[O any](cfg Config, withURL, withEndpoint func(string) O, withInsecure func() O) []O {
	var opts []O
	if cfg.OTLPEndpoint != "" {
		with := withEndpoint
		if strings.Contains(cfg.OTLPEndpoint, "://") {
			with = withURL
		}
		opts = append(opts, with(cfg.OTLPEndpoint))
	}
	if cfg.OTLPInsecure {
		opts = append(opts, withInsecure())
	}
	return opts
}

func (t *Telemetry) setupMetrics(cfg Config, res *resource.Resource) error {
	if !cfg.MetricsEnabled {
		otel.SetMeterProvider(metricnoop.NewMeterProvider())
		return nil
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	exp, err := otelprom.New(
		otelprom.WithRegisterer(reg),
		// Scope labels on every series only repeat ScopeName.
		otelprom.WithoutScopeInfo(),
	)
	if err != nil {
		return fmt.Errorf("telemetry: prometheus exporter: %w", err)
	}
	t.registry = reg
	t.mp = sdkmetric.NewMeterProvider(
		sdkmetric.WithReader(exp),
		sdkmetric.WithResource(res),
	)
	otel.SetMeterProvider(t.mp)
	return nil
}

// Logger returns the process logger built from Config. Records logged with
// a ctx that carries a valid span (InfoContext, ErrorContext, ...) get
// trace_id and span_id attributes.
func (t *Telemetry) Logger() *slog.Logger { return t.logger }

// MetricsHandler serves the Prometheus text exposition of the metrics
// registry: every instrument made from the global meter provider after
// Setup, plus Go runtime and process collectors. With MetricsEnabled false
// it answers 404.
func (t *Telemetry) MetricsHandler() http.Handler {
	if t.registry == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "telemetry: metrics disabled", http.StatusNotFound)
		})
	}
	return promhttp.HandlerFor(t.registry, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(t.logger.Handler(), slog.LevelWarn),
	})
}

// Registry returns the Prometheus registry behind MetricsHandler, or nil
// when metrics are disabled. Callers may register extra collectors on it.
func (t *Telemetry) Registry() *prometheus.Registry { return t.registry }

// Spans returns the spans ended so far when TracesExporter is "memory",
// and nil otherwise. It is meant for tests.
func (t *Telemetry) Spans() tracetest.SpanStubs {
	if t.memory == nil {
		return nil
	}
	return t.memory.GetSpans()
}

// ForceFlush exports every span ended so far and collects metrics. It
// returns the exporters' errors.
func (t *Telemetry) ForceFlush(ctx context.Context) error {
	var errs []error
	if t.tp != nil {
		errs = append(errs, t.tp.ForceFlush(ctx))
	}
	if t.mp != nil {
		errs = append(errs, t.mp.ForceFlush(ctx))
	}
	return errors.Join(errs...)
}

// Shutdown flushes pending spans and stops the providers; it is the last
// step of the process's shutdown. It is safe to call more than once: later
// calls return the first call's result. The global providers are left in
// place but stop recording. It returns the exporters' errors, or ctx's
// when the flush outlives it.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	t.once.Do(func() {
		var errs []error
		if t.tp != nil {
			if err := t.tp.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("telemetry: shutdown traces: %w", err))
			}
		}
		if t.mp != nil {
			if err := t.mp.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("telemetry: shutdown metrics: %w", err))
			}
		}
		t.shutdownErr = errors.Join(errs...)
	})
	return t.shutdownErr
}

func defaultOutput(cfg Config) io.Writer {
	if cfg.Output != nil {
		return cfg.Output
	}
	return os.Stderr
}
