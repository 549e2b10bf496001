package telemetry

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
)

// Trace exporters accepted in Config.TracesExporter.
const (
	// ExporterNone installs no SDK tracer provider: spans are no-ops, but
	// an incoming traceparent still passes through to the next hop.
	ExporterNone = "none"
	// ExporterOTLPGRPC sends spans with OTLP over gRPC (default port 4317).
	ExporterOTLPGRPC = "otlp-grpc"
	// ExporterOTLPHTTP sends spans with OTLP/protobuf over HTTP (default
	// port 4318, path /v1/traces).
	ExporterOTLPHTTP = "otlp-http"
	// ExporterMemory keeps ended spans in memory, for tests; read them with
	// Telemetry.Spans.
	ExporterMemory = "memory"
)

// Log formats accepted in Config.LogFormat.
const (
	LogFormatText = "text"
	LogFormatJSON = "json"
)

// DefaultServiceName is the service.name resource attribute when
// Config.ServiceName is empty.
const DefaultServiceName = "cluster-serving"

// DefaultMetricsListen is where a process serves MetricsHandler when its
// configuration names no address: loopback, Prometheus's usual 9464.
const DefaultMetricsListen = "127.0.0.1:9464"

// Config configures Setup. The zero value means all defaults: no tracing,
// no metrics, text logs at INFO on stderr.
//
// Config holds values only and never reads the environment: cmd maps
// config.yaml (and, if it wants, OTEL_* variables) onto it. The one
// exception is the OTLP exporters of the OTel SDK, which read the
// standard OTEL_EXPORTER_OTLP_* / OTEL_EXPORTER_OTLP_TRACES_* variables
// (headers, timeout, compression, certificates, and the endpoint when
// OTLPEndpoint is empty). Explicit fields here win over those variables.
type Config struct {
	// ServiceName is the service.name resource attribute.
	// Default "cluster-serving".
	ServiceName string
	// ServiceVersion is the service.version resource attribute.
	// Default: none.
	ServiceVersion string
	// TracesExporter is one of "none" (default), "otlp-grpc", "otlp-http"
	// or "memory" (tests).
	TracesExporter string
	// OTLPEndpoint is where OTLP spans go, either host:port or a URL
	// (http://host:4318/v1/traces for otlp-http, http://host:4317 for
	// otlp-grpc; an http:// URL also implies OTLPInsecure). Default: the
	// SDK's, from OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT or localhost:4317 /
	// localhost:4318.
	OTLPEndpoint string
	// OTLPInsecure disables TLS to the OTLP endpoint. Default false.
	OTLPInsecure bool
	// SampleRatio is the fraction (0, 1] of new root traces that are
	// sampled; a request that arrives with a traceparent follows its
	// parent's decision (parent-based sampling). Default 1.0 when
	// exporting. Zero means the default; to trace nothing, use
	// TracesExporter "none".
	SampleRatio float64
	// TraceDetail is TraceDetailRequest (default: the hop spans of a
	// request) or TraceDetailStages (the stage spans too).
	TraceDetail string
	// MetricsEnabled installs the OTel SDK meter provider with a Prometheus
	// exporter on a private registry served by Telemetry.MetricsHandler.
	// Default false: the global meter provider stays a no-op.
	MetricsEnabled bool
	// LogFormat is "text" (default) or "json".
	LogFormat string
	// LogLevel is a slog level name: "debug", "info" (default), "warn",
	// "error", optionally with an offset such as "info+2". Case-insensitive.
	LogLevel string
	// Output receives log lines. Default os.Stderr.
	Output io.Writer
}

// Validate reports the first invalid field, wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	switch c.TracesExporter {
	case "", ExporterNone, ExporterOTLPGRPC, ExporterOTLPHTTP, ExporterMemory:
	default:
		return fmt.Errorf("%w: TracesExporter %q: want none, otlp-grpc, otlp-http or memory", ErrInvalidConfig, c.TracesExporter)
	}
	if math.IsNaN(c.SampleRatio) || c.SampleRatio < 0 || c.SampleRatio > 1 {
		return fmt.Errorf("%w: SampleRatio %v: want a value in [0, 1]", ErrInvalidConfig, c.SampleRatio)
	}
	if c.OTLPEndpoint != "" && c.TracesExporter != ExporterOTLPGRPC && c.TracesExporter != ExporterOTLPHTTP {
		// The endpoint is not quoted: a URL may carry a password.
		return fmt.Errorf("%w: OTLPEndpoint set but TracesExporter is %q", ErrInvalidConfig, c.TracesExporter)
	}
	switch c.TraceDetail {
	case "", TraceDetailRequest, TraceDetailStages:
	default:
		return fmt.Errorf("%w: TraceDetail %q: want request or stages", ErrInvalidConfig, c.TraceDetail)
	}
	switch strings.ToLower(c.LogFormat) {
	case "", LogFormatText, LogFormatJSON:
	default:
		return fmt.Errorf("%w: LogFormat %q: want text or json", ErrInvalidConfig, c.LogFormat)
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return fmt.Errorf("%w: LogLevel %q: %v", ErrInvalidConfig, c.LogLevel, err)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.ServiceName == "" {
		c.ServiceName = DefaultServiceName
	}
	if c.TracesExporter == "" {
		c.TracesExporter = ExporterNone
	}
	if c.SampleRatio == 0 {
		c.SampleRatio = 1
	}
	if c.TraceDetail == "" {
		c.TraceDetail = TraceDetailRequest
	}
	c.LogFormat = strings.ToLower(c.LogFormat)
	if c.LogFormat == "" {
		c.LogFormat = LogFormatText
	}
	return c
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if s == "" {
		return slog.LevelInfo, nil
	}
	err := l.UnmarshalText([]byte(s))
	return l, err
}
