package telemetry

import (
	"cmp"
	"fmt"
	"net/url"
	"strings"
)

// The standard OpenTelemetry SDK variables TracesExporterFromEnv reads.
const (
	EnvSDKDisabled         = "OTEL_SDK_DISABLED"
	EnvTracesExporter      = "OTEL_TRACES_EXPORTER"
	EnvOTLPEndpoint        = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvOTLPTracesEndpoint  = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvOTLPProtocol        = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvOTLPTracesProtocol  = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	protocolGRPC           = "grpc"
	protocolHTTPProtobuf   = "http/protobuf"
	exporterValueOTLP      = "otlp"
	defaultEnvOTLPProtocol = protocolHTTPProtobuf
)

// TracesExporterFromEnv returns the Config.TracesExporter that the
// standard OTEL_* variables ask for, as the OpenTelemetry SDK environment
// specification reads them, or ExporterNone when they ask for nothing.
// getenv is os.Getenv in a process (telemetry itself never reads the
// environment).
//
//   - OTEL_SDK_DISABLED=true, or OTEL_TRACES_EXPORTER=none: ExporterNone.
//   - OTEL_TRACES_EXPORTER=otlp: OTLP.
//   - OTEL_TRACES_EXPORTER unset: the specification's default is otlp. It
//     applies when OTEL_EXPORTER_OTLP_ENDPOINT or
//     OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, which is how every
//     instrumented service is pointed at a collector. With neither set
//     the result is ExporterNone, not OTLP to localhost: a process on a
//     machine without a collector should not log a failed export every
//     few seconds.
//
// The OTLP protocol is OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else
// OTEL_EXPORTER_OTLP_PROTOCOL, else the specification's default
// http/protobuf: "grpc" gives ExporterOTLPGRPC, "http/protobuf"
// ExporterOTLPHTTP. The exporters then read the endpoint, headers and
// certificates from the same variables themselves. Any other exporter or
// protocol (console, zipkin, http/json) is an error naming the variable
// and its value, wrapping ErrInvalidConfig: the Go SDK has none of them,
// and silently exporting nothing is what this function exists to avoid.
func TracesExporterFromEnv(getenv func(string) string) (string, error) {
	if strings.EqualFold(strings.TrimSpace(getenv(EnvSDKDisabled)), "true") {
		return ExporterNone, nil
	}
	otlp := false
	if v := strings.TrimSpace(getenv(EnvTracesExporter)); v != "" {
		for _, name := range strings.Split(v, ",") {
			switch strings.TrimSpace(name) {
			case exporterValueOTLP:
				otlp = true
			case ExporterNone:
				return ExporterNone, nil
			default:
				return "", fmt.Errorf("%w: %s=%q: want otlp or none", ErrInvalidConfig, EnvTracesExporter, v)
			}
		}
	} else {
		otlp = getenv(EnvOTLPEndpoint) != "" || getenv(EnvOTLPTracesEndpoint) != ""
	}
	if !otlp {
		return ExporterNone, nil
	}
	key, protocol := EnvOTLPTracesProtocol, strings.TrimSpace(getenv(EnvOTLPTracesProtocol))
	if protocol == "" {
		key, protocol = EnvOTLPProtocol, strings.TrimSpace(getenv(EnvOTLPProtocol))
	}
	switch protocol {
	case "", defaultEnvOTLPProtocol:
		return ExporterOTLPHTTP, nil
	case protocolGRPC:
		return ExporterOTLPGRPC, nil
	}
	return "", fmt.Errorf("%w: %s=%q: want grpc or http/protobuf", ErrInvalidConfig, key, protocol)
}

// TracesEndpoint says where c's spans go, for a startup log line: its
// OTLPEndpoint, else the variable the exporter reads (getenv is
// os.Getenv in a process), with any password in the URL redacted.
func TracesEndpoint(c Config, getenv func(string) string) string {
	ep := cmp.Or(c.OTLPEndpoint, getenv(EnvOTLPTracesEndpoint), getenv(EnvOTLPEndpoint))
	if u, err := url.Parse(ep); err == nil && u.User != nil {
		return u.Redacted()
	}
	if ep == "" {
		return "the exporter's default (localhost)"
	}
	return ep
}
