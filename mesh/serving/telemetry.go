package serving

import (
	"fmt"

	"github.com/cluster-serving/cluster-serving/telemetry"
)

// TelemetryFromEnv maps f and the standard OTEL_* variables onto
// telemetry.Config (getenv is os.Getenv in a process). The key
// tracesExporter wins when it names an exporter; left empty or none (what
// `init` writes), the variables decide as the OTel specification says
// (telemetry.TracesExporterFromEnv): OTEL_EXPORTER_OTLP_ENDPOINT alone
// exports over OTLP, as it does for every other instrumented service, and
// OTEL_TRACES_EXPORTER=none turns that off.
func (f *File) TelemetryFromEnv(getenv func(string) string) (telemetry.Config, error) {
	tc := f.Telemetry(getenv)
	if f.TracesExporter != "" && f.TracesExporter != telemetry.ExporterNone {
		return tc, nil
	}
	exporter, err := telemetry.TracesExporterFromEnv(getenv)
	if err != nil {
		return tc, fmt.Errorf("%w (or set the config key tracesExporter)", err)
	}
	tc.TracesExporter = exporter
	return tc, nil
}
