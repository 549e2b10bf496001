package telemetry_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/cluster-serving/cluster-serving/telemetry"
)

// receiver collects what an OTLP endpoint got.
type receiver struct {
	mu       sync.Mutex
	spans    []*tracepb.Span
	services []string
}

func (r *receiver) add(req *coltracepb.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				r.services = append(r.services, kv.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			r.spans = append(r.spans, ss.GetSpans()...)
		}
	}
}

func (r *receiver) Spans() ([]*tracepb.Span, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans), slices.Clone(r.services)
}

// startGRPCReceiver runs an OTLP/gRPC trace receiver on 127.0.0.1:0.
func startGRPCReceiver(tb testing.TB) (*telemetry.Receiver, string) {
	tb.Helper()
	r, err := telemetry.StartReceiver("127.0.0.1:0", true)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(r.Close)
	return r, r.Addr()
}

// startHTTPReceiver runs an OTLP/HTTP (protobuf) trace receiver.
func startHTTPReceiver(tb testing.TB) (*receiver, string) {
	tb.Helper()
	r := &receiver{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
			http.Error(w, "content type "+ct, http.StatusUnsupportedMediaType)
			return
		}
		var msg coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &msg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.add(&msg)
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	})
	srv := httptest.NewServer(mux)
	tb.Cleanup(srv.Close)
	return r, srv.URL
}

func TestOTLPExport(t *testing.T) {
	grpcRecv, grpcAddr := startGRPCReceiver(t)
	httpRecv, httpURL := startHTTPReceiver(t)
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
			var logs syncBuffer
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
