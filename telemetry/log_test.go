package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"

	"github.com/cluster-serving/cluster-serving/telemetry"
)

func TestLoggerAddsTraceIDs(t *testing.T) {
	var buf bytes.Buffer
	tel := setup(t, telemetry.Config{TracesExporter: "memory", LogFormat: "json", LogLevel: "debug", Output: &buf})
	ctx, span := otel.Tracer(telemetry.ScopeName).Start(context.Background(), "op")
	defer span.End()
	sc := span.SpanContext()

	log := tel.Logger().With("job", "serving_stream").WithGroup("req")
	log.DebugContext(ctx, "with span", "uri", "u1")
	log.InfoContext(context.Background(), "without span")
	tel.Logger().Info("no ctx")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %d lines, want 3:\n%s", len(lines), buf.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatal(err)
	}
	group, _ := rec["req"].(map[string]any)
	if got, want := group[telemetry.LogKeyTraceID], sc.TraceID().String(); got != want {
		t.Errorf("trace_id = %v, want %v (line %s)", got, want, lines[0])
	}
	if got, want := group[telemetry.LogKeySpanID], sc.SpanID().String(); got != want {
		t.Errorf("span_id = %v, want %v", got, want)
	}
	if rec["job"] != "serving_stream" {
		t.Errorf("job = %v, want serving_stream", rec["job"])
	}
	for _, l := range lines[1:] {
		if strings.Contains(l, telemetry.LogKeyTraceID) {
			t.Errorf("line without span has trace_id: %s", l)
		}
	}
}

func TestLoggerTextAndLevel(t *testing.T) {
	var buf bytes.Buffer
	// Tracing off: an incoming traceparent still correlates the logs.
	tel := setup(t, telemetry.Config{LogLevel: "warn", Output: &buf})
	const traceID, spanID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	ctx := telemetry.Extract(context.Background(), nats.Header{"traceparent": {"00-" + traceID + "-" + spanID + "-01"}})
	tel.Logger().InfoContext(ctx, "dropped")
	tel.Logger().WarnContext(ctx, "kept")
	out := buf.String()
	if strings.Contains(out, "dropped") {
		t.Errorf("INFO logged at level warn: %s", out)
	}
	for _, want := range []string{"msg=kept", "trace_id=" + traceID, "span_id=" + spanID} {
		if !strings.Contains(out, want) {
			t.Errorf("output %q lacks %q", out, want)
		}
	}
}

// TestAtLeast: records below the floor are dropped, the rest pass with
// the logger's attributes.
func TestAtLeast(t *testing.T) {
	var buf bytes.Buffer
	base := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	l := telemetry.AtLeast(base, slog.LevelWarn).With("component", "lib")
	l.Info("notice")
	l.Warn("careful")
	l.Error("broken")
	got := buf.String()
	if strings.Contains(got, "notice") || !strings.Contains(got, "msg=careful component=lib") || !strings.Contains(got, "msg=broken component=lib") {
		t.Errorf("got %q, want the warning and the error with component=lib and no notice", got)
	}
}
