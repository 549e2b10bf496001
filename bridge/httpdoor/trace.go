package httpdoor

import (
	"context"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/cluster-serving/cluster-serving/telemetry"
)

var tracer = otel.Tracer(telemetry.ScopeName + "/bridge/httpdoor")

// traced wraps the routes in a server span per request. An incoming
// traceparent makes it the caller's child; the span is named after the
// route pattern once the mux has matched it ("POST /predict"). A request
// answered with an error is kept among the last errors (noteError).
func (s *Server) traced(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := telemetry.Start(ctx, tracer, r.Method, trace.SpanKindServer)
		defer span.End()
		recording := span.IsRecording()
		if recording {
			span.SetAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path))
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		r = r.WithContext(context.WithValue(ctx, statusWriterKey{}, sw))
		next.ServeHTTP(sw, r)
		s.noteError(ctx, r, sw)
		if !recording {
			return
		}
		if r.Pattern != "" {
			span.SetName(r.Pattern)
			span.SetAttributes(attribute.String("http.route", r.Pattern))
		}
		span.SetAttributes(attribute.Int("http.response.status_code", sw.status))
		if sw.status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(sw.status))
		}
	})
}

// noteError keeps the error a request was answered with among the
// door's last errors (telemetry.Tally), unless it is the status page's
// own (a page polling before its login is no error of the service).
func (s *Server) noteError(ctx context.Context, r *http.Request, sw *statusWriter) {
	if sw.status < 400 || sw.msg == "" || strings.HasPrefix(r.URL.Path, "/ui") {
		return
	}
	s.cfg.Metrics.RecordError(ctx, telemetry.DoorHTTP, sw.job, sw.status, sw.msg)
}

// statusWriter remembers the status code written, the error message
// writeError answered and the job a request was sent to (send).
type statusWriter struct {
	http.ResponseWriter
	status   int
	msg, job string
}

type statusWriterKey struct{}

// statusWriterOf is the request's statusWriter, found through w's
// wrappers; nil when w has none (a test calling a handler directly).
func statusWriterOf(w http.ResponseWriter) *statusWriter {
	for {
		switch t := w.(type) {
		case *statusWriter:
			return t
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return nil
		}
	}
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the real writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// record counts one inference request of job at this door.
func (s *Server) record(ctx context.Context, job string, status int, start time.Time) {
	s.cfg.Metrics.RecordRequest(ctx, telemetry.DoorHTTP, job, telemetry.OutcomeOf(status), time.Since(start))
}
