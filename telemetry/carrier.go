package telemetry

import (
	"context"
	"strings"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// HeaderCarrier adapts nats.Header to propagation.TextMapCarrier so that
// the global propagator can write and read traceparent, tracestate and
// baggage on NATS and JetStream messages.
//
// nats.Header is a case-sensitive map: Set stores keys exactly as the
// propagator gives them (lower case, as W3C Trace Context requires), and
// Get falls back to a case-insensitive match so that a header
// canonicalised by an HTTP gateway ("Traceparent") is still found.
// HeaderCarrier is not safe for concurrent use, like the map it wraps.
type HeaderCarrier nats.Header

var _ propagation.TextMapCarrier = HeaderCarrier(nil)

// Get returns the first value of key, or "" when it is absent.
func (c HeaderCarrier) Get(key string) string {
	if v := c[key]; len(v) > 0 {
		return v[0]
	}
	for k, v := range c {
		if len(v) > 0 && strings.EqualFold(k, key) {
			return v[0]
		}
	}
	return ""
}

// Set replaces the values of key with value. It panics on a nil carrier,
// as writing to a nil map does.
func (c HeaderCarrier) Set(key, value string) {
	c[key] = []string{value}
}

// Keys lists the header keys.
func (c HeaderCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// Inject writes ctx's span context and baggage into h through the global
// propagator. h must not be nil: allocate it with nats.Header{} or
// nats.NewMsg. With no span in ctx it writes nothing.
func Inject(ctx context.Context, h nats.Header) {
	otel.GetTextMapPropagator().Inject(ctx, HeaderCarrier(h))
}

// Extract returns ctx with the remote span context and baggage found in h.
// Start the receiving hop's span from the result to make it a child of the
// sender's span. A nil or empty h returns ctx unchanged.
func Extract(ctx context.Context, h nats.Header) context.Context {
	if len(h) == 0 {
		return ctx
	}
	return otel.GetTextMapPropagator().Extract(ctx, HeaderCarrier(h))
}

// Link returns a span link to the span context carried in h, for a batch
// span that processes many messages (OTel messaging conventions: one
// link per message). The link is empty (invalid span context) when h
// carries none; the SDK drops such links.
func Link(h nats.Header, attrs ...attribute.KeyValue) trace.Link {
	sc := trace.SpanContextFromContext(Extract(context.Background(), h))
	return trace.Link{SpanContext: sc, Attributes: attrs}
}
