package telemetry_test

import (
	"context"
	"slices"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/cluster-serving/cluster-serving/telemetry"
	"github.com/cluster-serving/cluster-serving/telemetry/telemetrytest"
)

// TestTraceDetailExport exports one request's spans, one per scope the
// serving path uses, over real OTLP/gRPC to a receiver in this test, at
// each trace detail: at request (the default) the stage scopes' spans are
// not exported and start nothing (the context stays the hop's, so a
// later hop is its child); at stages every span is.
func TestTraceDetailExport(t *testing.T) {
	hop := []string{telemetry.SpanDoorNATS, telemetry.SpanProcess}
	all := []string{telemetry.SpanDoorNATS, telemetry.SpanPublish, telemetry.SpanQueueWait, telemetry.SpanProcess,
		telemetry.SpanDecode, telemetry.SpanBatch, telemetry.SpanInferRun, telemetry.SpanEncode, telemetry.SpanReply}
	for _, tt := range []struct {
		detail string
		want   []string
	}{{"", hop}, {telemetry.TraceDetailRequest, hop}, {telemetry.TraceDetailStages, all}} {
		t.Run("detail="+tt.detail, func(t *testing.T) {
			recv, addr := startGRPCReceiver(t, true)
			tel, err := telemetry.Setup(t.Context(), telemetry.Config{TracesExporter: telemetry.ExporterOTLPGRPC,
				OTLPEndpoint: addr, OTLPInsecure: true, TraceDetail: tt.detail, Output: &telemetrytest.LogBuffer{}})
			if err != nil {
				t.Fatal(err)
			}
			mesh := otel.Tracer(telemetry.ScopeName + "/mesh")
			stages := otel.Tracer(telemetry.MeshStagesScope)
			infer := otel.Tracer(telemetry.ScopeName + "/infer")
			wire := otel.Tracer(telemetry.ScopeName + "/infer/wire")
			start := func(ctx context.Context, tr trace.Tracer, name string) (context.Context, trace.Span) {
				ctx, span := tr.Start(ctx, name)
				span.End() // ended before its parent: all this test reads are names and parents
				return ctx, span
			}
			ctx, door := start(context.Background(), mesh, telemetry.SpanDoorNATS)
			ctx, pub := start(ctx, stages, telemetry.SpanPublish)
			start(ctx, stages, telemetry.SpanQueueWait)
			pctx, proc := start(ctx, mesh, telemetry.SpanProcess)
			start(pctx, wire, telemetry.SpanDecode)
			bctx, _ := start(context.Background(), infer, telemetry.SpanBatch)
			start(bctx, infer, telemetry.SpanInferRun)
			start(pctx, wire, telemetry.SpanEncode)
			start(pctx, stages, telemetry.SpanReply)
			if err := tel.Shutdown(t.Context()); err != nil {
				t.Fatal(err)
			}

			spans, _ := recv.Spans()
			var names []string
			parent := map[string][]byte{}
			for _, s := range spans {
				names = append(names, s.GetName())
				parent[s.GetName()] = s.GetParentSpanId()
			}
			slices.Sort(names)
			if want := slices.Sorted(slices.Values(tt.want)); !slices.Equal(names, want) {
				t.Errorf("exported %v, want %v", names, want)
			}
			// The process span's parent: the publish span, or at request
			// detail the door's, since the publish span started nothing.
			wantParent := door.SpanContext().SpanID()
			if tt.detail == telemetry.TraceDetailStages {
				wantParent = pub.SpanContext().SpanID()
			} else if pub.IsRecording() || pub.SpanContext().IsValid() {
				t.Errorf("publish span: recording %v, valid %v; want neither", pub.IsRecording(), pub.SpanContext().IsValid())
			}
			if got := parent[telemetry.SpanProcess]; len(got) != 8 || [8]byte(got) != wantParent {
				t.Errorf("process span's parent %x, want %s", got, wantParent)
			}
			if !proc.SpanContext().IsValid() {
				t.Error("process span: invalid span context")
			}
		})
	}
}
