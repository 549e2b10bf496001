package telemetry_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"go.opentelemetry.io/otel"

	"github.com/cluster-serving/cluster-serving/telemetry"
	"github.com/cluster-serving/cluster-serving/telemetry/telemetrytest"
)

func TestTracesExporterFromEnv(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    string
		wantErr bool
	}{
		{"nothing set", nil, telemetry.ExporterNone, false},
		{"endpoint alone: the spec's default otlp over http/protobuf", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, telemetry.ExporterOTLPHTTP, false},
		{"traces endpoint alone", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, telemetry.ExporterOTLPHTTP, false},
		{"endpoint and grpc", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, telemetry.ExporterOTLPGRPC, false},
		{"traces protocol wins", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, telemetry.ExporterOTLPGRPC, false},
		{"exporter otlp without endpoint", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, telemetry.ExporterOTLPHTTP, false},
		{"exporter none beats the endpoint", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, telemetry.ExporterNone, false},
		{"sdk disabled beats everything", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, telemetry.ExporterNone, false},
		{"unknown exporter", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, "", true},
		{"unknown protocol", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := telemetry.TracesExporterFromEnv(func(k string) string { return tt.env[k] })
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("got %q, %v; want %q, error %v", got, err, tt.want, tt.wantErr)
			}
			if err != nil && !errors.Is(err, telemetry.ErrInvalidConfig) {
				t.Errorf("got %v, want ErrInvalidConfig", err)
			}
		})
	}
}

// TestOTLPEndpointVariableAloneExports sets only
// OTEL_EXPORTER_OTLP_ENDPOINT, as one points any instrumented service at
// a collector, and checks that spans reach a real OTLP/HTTP receiver: the
// exporter comes from TracesExporterFromEnv and the endpoint from the
// variable, read by the SDK's exporter (which appends /v1/traces).
func TestOTLPEndpointVariableAloneExports(t *testing.T) {
	recv, url := startHTTPReceiver(t, true)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
	exporter, err := telemetry.TracesExporterFromEnv(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	var logs telemetrytest.LogBuffer
	tel, err := telemetry.Setup(t.Context(), telemetry.Config{TracesExporter: exporter, Output: &logs})
	if err != nil {
		t.Fatal(err)
	}
	_, span := otel.Tracer(telemetry.ScopeName).Start(context.Background(), telemetry.SpanPublish)
	span.End()
	if err := tel.Shutdown(t.Context()); err != nil {
		t.Fatalf("Shutdown: %v (log: %s)", err, logs.String())
	}
	spans, _ := recv.Spans()
	found := false
	for _, s := range spans {
		found = found || [16]byte(s.GetTraceId()) == span.SpanContext().TraceID()
	}
	if !found {
		t.Errorf("receiver got %d spans, none of trace %s (log: %s)", len(spans), span.SpanContext().TraceID(), logs.String())
	}
}

func TestTracesEndpoint(t *testing.T) {
	env := map[string]string{telemetry.EnvOTLPEndpoint: "http://u:pw@all:4318", telemetry.EnvOTLPTracesEndpoint: "http://traces:4318"}
	for _, tc := range []struct {
		name string
		key  string
		env  map[string]string
		want string
	}{
		{"the key wins", "k:4317", env, "k:4317"},
		{"the traces variable before the general one", "", env, "http://traces:4318"},
		{"a password redacted", "", map[string]string{telemetry.EnvOTLPEndpoint: "http://u:pw@all:4318"}, "http://u:xxxxx@all:4318"},
		{"none set", "", nil, "the exporter's default (localhost)"},
	} {
		got := telemetry.TracesEndpoint(telemetry.Config{OTLPEndpoint: tc.key}, func(k string) string { return tc.env[k] })
		if got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}
