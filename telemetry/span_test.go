package telemetry_test

import (
	"context"
	"io"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/cluster-serving/cluster-serving/telemetry"
)

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
