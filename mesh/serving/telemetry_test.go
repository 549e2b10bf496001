package serving_test

import (
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/mesh/serving"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

func TestFileTelemetryFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name, key string
		env       map[string]string
		want      string // the exporter; "" for an error
	}{
		{"nothing set", "", nil, telemetry.ExporterNone},
		{"the endpoint variable alone", "", map[string]string{telemetry.EnvOTLPEndpoint: "http://c:4318"}, telemetry.ExporterOTLPHTTP},
		{"key none, the variables decide", "none", map[string]string{telemetry.EnvOTLPEndpoint: "c:4317", telemetry.EnvOTLPProtocol: "grpc"}, telemetry.ExporterOTLPGRPC},
		{"the key wins", "otlp-grpc", map[string]string{telemetry.EnvTracesExporter: "none"}, telemetry.ExporterOTLPGRPC},
		{"a bad variable", "", map[string]string{telemetry.EnvTracesExporter: "zipkin"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			yaml := "modelPath: m\n"
			if tc.key != "" {
				yaml += "tracesExporter: " + tc.key + "\n"
			}
			if tc.key != "" && tc.key != "none" {
				yaml += "otlpEndpoint: c:4317\n"
			}
			file, err := serving.ParseFile([]byte(yaml))
			if err != nil {
				t.Fatal(err)
			}
			got, err := file.TelemetryFromEnv(func(k string) string { return tc.env[k] })
			if tc.want == "" {
				if err == nil || !strings.Contains(err.Error(), "tracesExporter") {
					t.Errorf("got %v, want an error naming the key tracesExporter", err)
				}
				return
			}
			if err != nil || got.TracesExporter != tc.want {
				t.Errorf("got %q (%v), want %q", got.TracesExporter, err, tc.want)
			}
		})
	}
}
