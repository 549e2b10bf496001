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

// TestStart checks that telemetry.Start records a child under a sampled
// or absent parent, as tracer.Start does, and under a sampled-out parent
// returns the parent itself: no span, and the trace id and the
// not-sampled flag still reach the next hop.
func TestStart(t *testing.T) {
	tel := setup(t, telemetry.Config{TracesExporter: telemetry.ExporterMemory, Output: io.Discard})
	tracer := otel.GetTracerProvider().Tracer(telemetry.ScopeName)
	remote := func(flags trace.TraceFlags) context.Context {
		return trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
			TraceID:    trace.TraceID{1, 2, 3},
			SpanID:     trace.SpanID{4, 5, 6},
			TraceFlags: flags,
			Remote:     true,
		}))
	}
	sampledOut := remote(0)
	// A parent the SDK made and sampled out: the ratio sampler at 0 never
	// samples, so this one comes from a parent-based SDK child of an
	// unsampled remote parent.
	_, localOut := tracer.Start(sampledOut, "local sampled out")
	localCtx := trace.ContextWithSpan(context.Background(), localOut)

	for _, tc := range []struct {
		name       string
		ctx        context.Context
		wantRecord bool
	}{
		{"no parent", context.Background(), true},
		{"sampled remote parent", remote(trace.FlagsSampled), true},
		{"sampled-out remote parent", sampledOut, false},
		{"sampled-out local parent", localCtx, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(tel.Spans())
			parent := trace.SpanFromContext(tc.ctx)
			ctx, span := telemetry.Start(tc.ctx, tracer, "child", trace.SpanKindServer)
			span.End()
			if got := span.IsRecording() || len(tel.Spans()) > before; got != tc.wantRecord {
				t.Fatalf("recorded: got %v, want %v", got, tc.wantRecord)
			}
			if tc.wantRecord {
				got := tel.Spans()[before]
				if got.SpanKind != trace.SpanKindServer || got.Name != "child" {
					t.Errorf("span: got %s %v, want child server", got.Name, got.SpanKind)
				}
				if p := parent.SpanContext(); p.IsValid() && got.Parent.SpanID() != p.SpanID() {
					t.Errorf("parent: got %v, want %v", got.Parent.SpanID(), p.SpanID())
				}
				return
			}
			if ctx != tc.ctx || !span.SpanContext().Equal(parent.SpanContext()) {
				t.Errorf("sampled out: got a new ctx or span, want the parent's as they are")
			}
			if sc := trace.SpanContextFromContext(ctx); sc.TraceID() != (trace.TraceID{1, 2, 3}) || sc.IsSampled() {
				t.Errorf("sampled out: got span context %v, want trace 0102030... not sampled", sc)
			}
		})
	}
}
