package telemetry

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// Log attribute keys added by TraceHandler.
const (
	LogKeyTraceID = "trace_id"
	LogKeySpanID  = "span_id"
)

// TraceHandler is a slog.Handler that adds trace_id and span_id (lower-case
// hex, as in traceparent) to every record whose ctx carries a valid span
// context, then passes the record to the wrapped handler. Use the logger's
// *Context methods (InfoContext, ErrorContext, ...) so the ctx reaches it.
//
// Attributes land where the record's other attributes go: under a
// logger's WithGroup they are inside that group. TraceHandler is safe for
// concurrent use when the wrapped handler is.
type TraceHandler struct {
	next slog.Handler
}

// NewTraceHandler wraps next with a TraceHandler.
func NewTraceHandler(next slog.Handler) *TraceHandler {
	return &TraceHandler{next: next}
}

// Enabled reports whether the wrapped handler handles level.
func (h *TraceHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

// Handle adds the trace attributes when ctx carries a valid span context.
func (h *TraceHandler) Handle(ctx context.Context, r slog.Record) error {
	if ctx != nil {
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			// Clone: the record's attribute storage may be shared with
			// the caller's copy.
			r = r.Clone()
			r.AddAttrs(
				slog.String(LogKeyTraceID, sc.TraceID().String()),
				slog.String(LogKeySpanID, sc.SpanID().String()),
			)
		}
	}
	return h.next.Handle(ctx, r)
}

// WithAttrs returns a TraceHandler wrapping next.WithAttrs(attrs).
func (h *TraceHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &TraceHandler{next: h.next.WithAttrs(attrs)}
}

// WithGroup returns a TraceHandler wrapping next.WithGroup(name).
func (h *TraceHandler) WithGroup(name string) slog.Handler {
	return &TraceHandler{next: h.next.WithGroup(name)}
}

func newLogger(cfg Config) *slog.Logger {
	level, _ := parseLevel(cfg.LogLevel) // validated by Setup
	opts := &slog.HandlerOptions{Level: level}
	out := defaultOutput(cfg)
	var h slog.Handler
	if cfg.LogFormat == LogFormatJSON {
		h = slog.NewJSONHandler(out, opts)
	} else {
		h = slog.NewTextHandler(out, opts)
	}
	return slog.New(NewTraceHandler(h))
}

// AtLeast returns a logger writing to l's handler only the records of
// level min and above: a chatty library's notices stay out of the
// service's log while its warnings and errors reach it.
func AtLeast(l *slog.Logger, min slog.Level) *slog.Logger {
	return slog.New(minLevel{l.Handler(), min})
}

type minLevel struct {
	next slog.Handler
	min  slog.Level
}

func (h minLevel) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= h.min && h.next.Enabled(ctx, level)
}

func (h minLevel) Handle(ctx context.Context, r slog.Record) error { return h.next.Handle(ctx, r) }

func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{h.next.WithAttrs(attrs), h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler { return minLevel{h.next.WithGroup(name), h.min} }
