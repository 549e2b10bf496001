package telemetry

import (
	"context"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/protobuf/proto"
)

// Receiver is a minimal OTLP trace receiver, over gRPC on the address
// StartReceiver listens on and over HTTP (protobuf bodies) through
// ServeHTTP: it keeps every span it is sent, or only counts them.
// `cluster-serving bench` exports to a counting one on loopback to
// measure what tracing costs, and tests assert what processes exported.
// Safe for concurrent use; Close is idempotent.
type Receiver struct {
	coltracepb.UnimplementedTraceServiceServer

	srv  *grpc.Server
	addr string
	done chan struct{}
	once sync.Once

	mu       sync.Mutex
	spans    []*tracepb.Span
	services []string
	keep     bool
	count    int
}

// StartReceiver listens on addr ("127.0.0.1:0" for a free port) and serves
// until Close. With keep false it only counts spans (for benchmarks): it
// walks each export request's wire format down to its spans, checking
// that each is well formed and has its ids (countSpans), instead of
// decoding every name and attribute into messages that it would drop;
// a malformed request is refused as with keep.
func StartReceiver(addr string, keep bool) (*Receiver, error) {
	var srv *grpc.Server
	r := &Receiver{done: make(chan struct{}), keep: keep}
	if keep {
		srv = grpc.NewServer()
		coltracepb.RegisterTraceServiceServer(srv, r)
	} else {
		srv = grpc.NewServer(grpc.ForceServerCodecV2(countCodec{encoding.GetCodecV2("proto")}))
		srv.RegisterService(countService(r), nil)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	r.srv, r.addr = srv, ln.Addr().String()
	go func() {
		defer close(r.done)
		_ = r.srv.Serve(ln)
	}()
	return r, nil
}

// Addr is the host:port the receiver listens on.
func (r *Receiver) Addr() string { return r.addr }

// Export implements the OTLP trace service.
func (r *Receiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.add(req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// ServeHTTP is OTLP/HTTP with protobuf bodies: POST /v1/traces (what the
// otlp-http exporter sends); mount it on an http.Server or httptest.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.Error(w, "want POST /v1/traces", http.StatusNotFound)
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, "content type "+ct+": want application/x-protobuf", http.StatusUnsupportedMediaType)
		return
	}
	body, err := io.ReadAll(req.Body)
	var msg coltracepb.ExportTraceServiceRequest
	var n int
	switch {
	case err != nil:
	case r.keep:
		if err = proto.Unmarshal(body, &msg); err == nil {
			r.add(&msg)
		}
	default:
		if n, err = countSpans(body); err == nil {
			r.addCount(n)
		}
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (r *Receiver) add(req *coltracepb.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" && r.keep {
				r.services = append(r.services, kv.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			r.count += len(ss.GetSpans())
			if r.keep {
				r.spans = append(r.spans, ss.GetSpans()...)
			}
		}
	}
}

// addCount counts n spans of a request that only counting decoded.
func (r *Receiver) addCount(n int) {
	r.mu.Lock()
	r.count += n
	r.mu.Unlock()
}

// Spans returns the spans kept so far and the service.name of each
// resource they came with.
func (r *Receiver) Spans() ([]*tracepb.Span, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans), slices.Clone(r.services)
}

// Count is the number of spans received.
func (r *Receiver) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}

// Close stops the server and waits for it.
func (r *Receiver) Close() {
	r.once.Do(func() {
		r.srv.Stop()
		<-r.done
	})
}
