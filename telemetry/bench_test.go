package telemetry_test

import (
	"context"
	"io"
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/cluster-serving/cluster-serving/telemetry"
)

// BenchmarkSpan measures one root span start/end: tracing off (Setup
// "none"), and on with a batching processor over a discarding exporter
// (the OTLP path minus the network) at parent-based ratios 1.0 and 0.01.
func BenchmarkSpan(b *testing.B) {
	run := func(b *testing.B, tp trace.TracerProvider) {
		tracer := tp.Tracer(telemetry.ScopeName)
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			_, span := tracer.Start(ctx, telemetry.SpanDecode)
			span.End()
		}
	}
	b.Run("off", func(b *testing.B) {
		setup(b, telemetry.Config{Output: io.Discard})
		run(b, otel.GetTracerProvider())
	})
	for _, tc := range []struct {
		name  string
		ratio float64
	}{{"ratio=1.0", 1}, {"ratio=0.01", 0.01}} {
		b.Run(tc.name, func(b *testing.B) {
			tp := sdktrace.NewTracerProvider(
				sdktrace.WithBatcher(tracetest.NewNoopExporter()),
				sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(tc.ratio))),
			)
			b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			run(b, tp)
		})
	}
}

// BenchmarkChildSampledOut measures one hop's span under a sampled-out
// parent (ratio 0.01, the request not drawn): tracer.Start, which asks
// the sampler and allocates a span nobody records, against
// telemetry.Start, which hands back the parent.
func BenchmarkChildSampledOut(b *testing.B) {
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(tracetest.NewNoopExporter()),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.01))),
	)
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tracer := tp.Tracer(telemetry.ScopeName)
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, Remote: true,
	}))
	b.Run("tracer.Start", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, span := tracer.Start(ctx, telemetry.SpanProcess, trace.WithSpanKind(trace.SpanKindConsumer))
			span.End()
		}
	})
	b.Run("telemetry.Start", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, span := telemetry.Start(ctx, tracer, telemetry.SpanProcess, trace.SpanKindConsumer)
			span.End()
		}
	})
}

// BenchmarkCarrier measures what every work message pays for trace
// context: Inject into its headers at the publisher and Extract from them
// at the worker, with the W3C propagator Setup installs and a work
// message's usual headers beside the traceparent.
func BenchmarkCarrier(b *testing.B) {
	setup(b, telemetry.Config{Output: io.Discard})
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, Remote: true,
	}))
	header := func() nats.Header {
		return nats.Header{
			"Cs-Content-Type": {"application/json"}, "Cs-Deadline": {"1764000000000000000"},
			"Nats-Msg-Id": {"abcdefghijklmnopqrstuv"}, "Cs-Reply-To": {"_INBOX.abcdefghijklmnopqrstuv.1"},
		}
	}
	b.Run("inject", func(b *testing.B) {
		h := header()
		b.ReportAllocs()
		for b.Loop() {
			telemetry.Inject(ctx, h) // replaces the traceparent each time
		}
	})
	b.Run("extract", func(b *testing.B) {
		h := header()
		telemetry.Inject(ctx, h)
		b.ReportAllocs()
		for b.Loop() {
			telemetry.Extract(context.Background(), h)
		}
	})
}
