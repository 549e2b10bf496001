package telemetry_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/cluster-serving/cluster-serving/telemetry"
)

func TestSetupMemoryRecordsSpans(t *testing.T) {
	tel := setup(t, telemetry.Config{TracesExporter: telemetry.ExporterMemory, Output: io.Discard})
	tracer := otel.Tracer(telemetry.ScopeName)

	ctx, parent := tracer.Start(context.Background(), telemetry.SpanPublish, trace.WithSpanKind(trace.SpanKindProducer))
	_, child := tracer.Start(ctx, telemetry.SpanDecode)
	child.End()
	parent.End()

	spans := tel.Spans()
	if len(spans) != 2 {
		t.Fatalf("got %d spans, want 2", len(spans))
	}
	if got, want := spans[0].Name, telemetry.SpanDecode; got != want {
		t.Errorf("first ended span = %q, want %q", got, want)
	}
	if got, want := spans[0].Parent.SpanID(), spans[1].SpanContext.SpanID(); got != want {
		t.Errorf("child's parent span id = %s, want %s", got, want)
	}
	if got, want := spans[1].SpanKind, trace.SpanKindProducer; got != want {
		t.Errorf("publish kind = %v, want %v", got, want)
	}
	var service string
	for _, kv := range spans[1].Resource.Attributes() {
		if kv.Key == "service.name" {
			service = kv.Value.AsString()
		}
	}
	if service != telemetry.DefaultServiceName {
		t.Errorf("service.name = %q, want %q", service, telemetry.DefaultServiceName)
	}
}

func TestSetupNoneIsNoopButPropagates(t *testing.T) {
	tel := setup(t, telemetry.Config{Output: io.Discard})
	tracer := otel.Tracer(telemetry.ScopeName)

	_, span := tracer.Start(context.Background(), "root")
	if span.IsRecording() || span.SpanContext().IsValid() {
		t.Errorf("root span with tracing off: recording=%v valid=%v, want false false",
			span.IsRecording(), span.SpanContext().IsValid())
	}
	span.End()
	if got := tel.Spans(); got != nil {
		t.Errorf("Spans() = %v, want nil", got)
	}

	// A traceparent that arrives at a door still reaches the next hop.
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	in := nats.Header{"traceparent": {tp}}
	ctx, hop := tracer.Start(telemetry.Extract(context.Background(), in), "hop")
	defer hop.End()
	out := nats.Header{}
	telemetry.Inject(ctx, out)
	if got := out.Get("traceparent"); got != tp {
		t.Errorf("forwarded traceparent = %q, want %q", got, tp)
	}
}

func TestShutdownIdempotent(t *testing.T) {
	tel, err := telemetry.Setup(t.Context(), telemetry.Config{TracesExporter: "memory", MetricsEnabled: true, Output: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := tel.Shutdown(t.Context()); err != nil {
			t.Fatalf("Shutdown #%d = %v, want nil", i+1, err)
		}
	}
}

func TestMetricsHandlerDisabled(t *testing.T) {
	tel := setup(t, telemetry.Config{Output: io.Discard})
	rec := httptest.NewRecorder()
	tel.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("status = %d, want 404", rec.Code)
	}
	if tel.Registry() != nil {
		t.Error("Registry() != nil with metrics disabled")
	}
}
