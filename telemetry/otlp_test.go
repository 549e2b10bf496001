package telemetry_test

import (
	"context"
	"net/http/httptest"
	"slices"
	"testing"

	"go.opentelemetry.io/otel"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/cluster-serving/cluster-serving/telemetry"
	"github.com/cluster-serving/cluster-serving/telemetry/telemetrytest"
)

// startGRPCReceiver runs an OTLP/gRPC trace receiver on 127.0.0.1:0 that
// keeps the spans, or with keep false only counts them.
func startGRPCReceiver(tb testing.TB, keep bool) (*telemetry.Receiver, string) {
	tb.Helper()
	r, err := telemetry.StartReceiver("127.0.0.1:0", keep)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(r.Close)
	return r, r.Addr()
}

// startHTTPReceiver runs an OTLP/HTTP (protobuf) trace receiver, keeping
// or counting as startGRPCReceiver, and returns its base URL.
func startHTTPReceiver(tb testing.TB, keep bool) (*telemetry.Receiver, string) {
	tb.Helper()
	r, _ := startGRPCReceiver(tb, keep)
	srv := httptest.NewServer(r)
	tb.Cleanup(srv.Close)
	return r, srv.URL
}

func TestOTLPExport(t *testing.T) {
	grpcRecv, grpcAddr := startGRPCReceiver(t, true)
	httpRecv, httpURL := startHTTPReceiver(t, true)
	tests := []struct {
		name string
		cfg  telemetry.Config
		recv interface {
			Spans() ([]*tracepb.Span, []string)
		}
	}{
		{"grpc host:port", telemetry.Config{TracesExporter: telemetry.ExporterOTLPGRPC, OTLPEndpoint: grpcAddr, OTLPInsecure: true}, grpcRecv},
		{"http url", telemetry.Config{TracesExporter: telemetry.ExporterOTLPHTTP, OTLPEndpoint: httpURL + "/v1/traces"}, httpRecv},
		{"http host:port", telemetry.Config{TracesExporter: telemetry.ExporterOTLPHTTP, OTLPEndpoint: httpURL[len("http://"):], OTLPInsecure: true}, httpRecv},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs telemetrytest.LogBuffer
			tt.cfg.ServiceName = "otlp-test"
			tt.cfg.Output = &logs
			tel, err := telemetry.Setup(t.Context(), tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			tracer := otel.Tracer(telemetry.ScopeName)
			ctx, root := tracer.Start(context.Background(), telemetry.SpanPublish)
			_, child := tracer.Start(ctx, telemetry.SpanInferRun)
			child.End()
			root.End()
			traceID := root.SpanContext().TraceID()

			// Shutdown flushes the batcher: the spans must be there after it.
			if err := tel.Shutdown(t.Context()); err != nil {
				t.Fatalf("Shutdown: %v (log: %s)", err, logs.String())
			}
			spans, services := tt.recv.Spans()
			var names []string
			for _, s := range spans {
				if [16]byte(s.GetTraceId()) == traceID {
					names = append(names, s.GetName())
				}
			}
			slices.Sort(names)
			want := []string{telemetry.SpanPublish, telemetry.SpanInferRun}
			slices.Sort(want)
			if !slices.Equal(names, want) {
				t.Errorf("received spans of trace %s = %v, want %v", traceID, names, want)
			}
			if !slices.Contains(services, "otlp-test") {
				t.Errorf("service.name values %v, want otlp-test", services)
			}
		})
	}
}

// TestReceiverCounts exports spans over both protocols to receivers that
// only count (what the bench runs) and checks every span is counted.
func TestReceiverCounts(t *testing.T) {
	grpcRecv, grpcAddr := startGRPCReceiver(t, false)
	httpRecv, httpURL := startHTTPReceiver(t, false)
	for _, tt := range []struct {
		name string
		cfg  telemetry.Config
		recv *telemetry.Receiver
	}{
		{"grpc", telemetry.Config{TracesExporter: telemetry.ExporterOTLPGRPC, OTLPEndpoint: grpcAddr, OTLPInsecure: true}, grpcRecv},
		{"http", telemetry.Config{TracesExporter: telemetry.ExporterOTLPHTTP, OTLPEndpoint: httpURL + "/v1/traces"}, httpRecv},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var logs telemetrytest.LogBuffer
			tt.cfg.Output = &logs
			tel, err := telemetry.Setup(t.Context(), tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			const n = 1500 // three batches of the processor's 512, the last one short
			tracer := otel.Tracer(telemetry.ScopeName)
			for range n / 2 {
				ctx, root := tracer.Start(context.Background(), telemetry.SpanDoorNATS)
				_, child := tracer.Start(ctx, telemetry.SpanProcess)
				child.End()
				root.End()
			}
			if err := tel.Shutdown(t.Context()); err != nil {
				t.Fatalf("Shutdown: %v (log: %s)", err, logs.String())
			}
			if got := tt.recv.Count(); got != n {
				t.Errorf("Count() = %d, want %d (log: %s)", got, n, logs.String())
			}
			if spans, _ := tt.recv.Spans(); len(spans) != 0 {
				t.Errorf("a counting receiver kept %d spans", len(spans))
			}
		})
	}
}
