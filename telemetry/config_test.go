package telemetry_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/telemetry"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name      string
		cfg       telemetry.Config
		wantField string // "" means valid
	}{
		{"zero value", telemetry.Config{}, ""},
		{"all set", telemetry.Config{TracesExporter: "otlp-grpc", OTLPEndpoint: "collector:4317", OTLPInsecure: true,
			SampleRatio: 0.25, TraceDetail: "request", MetricsEnabled: true, LogFormat: "JSON", LogLevel: "debug"}, ""},
		{"level with offset", telemetry.Config{LogLevel: "INFO+2"}, ""},
		{"unknown exporter", telemetry.Config{TracesExporter: "jaeger"}, "TracesExporter"},
		{"ratio above 1", telemetry.Config{SampleRatio: 1.5}, "SampleRatio"},
		{"negative ratio", telemetry.Config{SampleRatio: -0.1}, "SampleRatio"},
		{"NaN ratio", telemetry.Config{SampleRatio: math.NaN()}, "SampleRatio"},
		{"endpoint without otlp", telemetry.Config{TracesExporter: "memory", OTLPEndpoint: "x:1"}, "OTLPEndpoint"},
		{"bad format", telemetry.Config{LogFormat: "xml"}, "LogFormat"},
		{"bad level", telemetry.Config{LogLevel: "loud"}, "LogLevel"},
		{"detail stages", telemetry.Config{TraceDetail: "stages"}, ""},
		{"bad detail", telemetry.Config{TraceDetail: "spans"}, "TraceDetail"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.wantField == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, telemetry.ErrInvalidConfig) {
				t.Fatalf("Validate() = %v, want ErrInvalidConfig", err)
			}
			if !strings.Contains(err.Error(), tt.wantField) {
				t.Errorf("Validate() = %q, want it to name %s", err, tt.wantField)
			}
		})
	}
}

func TestSetupRejectsInvalidConfig(t *testing.T) {
	_, err := telemetry.Setup(t.Context(), telemetry.Config{TracesExporter: "zipkin"})
	if !errors.Is(err, telemetry.ErrInvalidConfig) {
		t.Fatalf("Setup() error = %v, want ErrInvalidConfig", err)
	}
}
