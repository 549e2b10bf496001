package telemetry_test

import (
	"context"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/trace"

	"github.com/cluster-serving/cluster-serving/embedded"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

func TestHeaderCarrier(t *testing.T) {
	c := telemetry.HeaderCarrier{}
	c.Set("traceparent", "a")
	c.Set("traceparent", "b")
	if got := c["traceparent"]; !slices.Equal(got, []string{"b"}) {
		t.Errorf("after two Sets: %v, want [b]", got)
	}
	if _, ok := c["Traceparent"]; ok {
		t.Error("Set canonicalised the key; W3C wants it lower case")
	}
	tests := []struct {
		name string
		h    telemetry.HeaderCarrier
		key  string
		want string
	}{
		{"exact", telemetry.HeaderCarrier{"traceparent": {"x"}}, "traceparent", "x"},
		{"canonicalised by a gateway", telemetry.HeaderCarrier{"Traceparent": {"y"}}, "traceparent", "y"},
		{"absent", telemetry.HeaderCarrier{"uri": {"1"}}, "traceparent", ""},
		{"empty values", telemetry.HeaderCarrier{"traceparent": {}}, "traceparent", ""},
		{"nil", nil, "traceparent", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.h.Get(tt.key); got != tt.want {
				t.Errorf("Get(%q) = %q, want %q", tt.key, got, tt.want)
			}
		})
	}
	keys := telemetry.HeaderCarrier{"a": {"1"}, "b": {"2"}}.Keys()
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"a", "b"}) {
		t.Errorf("Keys() = %v, want [a b]", keys)
	}
}

func TestExtractEmptyHeader(t *testing.T) {
	setup(t, telemetry.Config{TracesExporter: "memory", Output: io.Discard})
	ctx := context.Background()
	for _, h := range []nats.Header{nil, {}} {
		if got := telemetry.Extract(ctx, h); trace.SpanContextFromContext(got).IsValid() {
			t.Errorf("Extract(%v) carries a span context, want none", h)
		}
	}
}

// TestPropagationAcrossNATS sends a message between two connections to a
// real (embedded) NATS server and checks that the receiver's span is a
// child of the sender's, and that baggage survives.
func TestPropagationAcrossNATS(t *testing.T) {
	tel := setup(t, telemetry.Config{TracesExporter: "memory", Output: io.Discard})
	srv, err := embedded.Start(embedded.Config{Port: embedded.RandomPort})
	if err != nil {
		t.Fatalf("embedded.Start: %v", err)
	}
	t.Cleanup(srv.Shutdown)

	connect := func(name string) *nats.Conn {
		nc, err := nats.Connect(srv.ClientURL(), nats.Name(name))
		if err != nil {
			t.Fatalf("connect %s: %v", name, err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	sender, receiver := connect("sender"), connect("receiver")

	const subject = "telemetry.test.propagation"
	sub, err := receiver.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	if err := receiver.Flush(); err != nil {
		t.Fatal(err)
	}

	tracer := otel.Tracer(telemetry.ScopeName)
	member, _ := baggage.NewMember("tenant", "acme")
	bag, _ := baggage.New(member)
	ctx := baggage.ContextWithBaggage(context.Background(), bag)
	ctx, send := tracer.Start(ctx, telemetry.SpanPublish, trace.WithSpanKind(trace.SpanKindProducer))
	msg := nats.NewMsg(subject)
	msg.Data = []byte("payload")
	telemetry.Inject(ctx, msg.Header)
	if err := sender.PublishMsg(msg); err != nil {
		t.Fatal(err)
	}
	send.End()

	got, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatalf("NextMsg: %v", err)
	}
	if _, ok := got.Header["traceparent"]; !ok {
		t.Fatalf("received header keys %v, want lower-case traceparent", telemetry.HeaderCarrier(got.Header).Keys())
	}
	rctx := telemetry.Extract(context.Background(), got.Header)
	if v := baggage.FromContext(rctx).Member("tenant").Value(); v != "acme" {
		t.Errorf("baggage tenant = %q, want acme", v)
	}
	_, recv := tracer.Start(rctx, telemetry.SpanProcess, trace.WithSpanKind(trace.SpanKindConsumer))
	recv.End()

	spans := tel.Spans()
	if len(spans) != 2 {
		t.Fatalf("got %d spans, want 2", len(spans))
	}
	s, r := spans[0], spans[1]
	if got, want := r.SpanContext.TraceID(), s.SpanContext.TraceID(); got != want {
		t.Errorf("receiver trace id = %s, want sender's %s", got, want)
	}
	if got, want := r.Parent.SpanID(), s.SpanContext.SpanID(); got != want {
		t.Errorf("receiver parent span id = %s, want sender's span id %s", got, want)
	}
	if !r.Parent.IsRemote() {
		t.Error("receiver parent is not marked remote")
	}
}

func TestLinkFromHeader(t *testing.T) {
	tel := setup(t, telemetry.Config{TracesExporter: "memory", Output: io.Discard})
	tracer := otel.Tracer(telemetry.ScopeName)

	var headers []nats.Header
	var want []trace.SpanContext
	for range 3 {
		ctx, s := tracer.Start(context.Background(), telemetry.SpanPublish)
		h := nats.Header{}
		telemetry.Inject(ctx, h)
		headers = append(headers, h)
		want = append(want, s.SpanContext())
		s.End()
	}
	links := make([]trace.Link, 0, len(headers))
	for _, h := range headers {
		links = append(links, telemetry.Link(h))
	}
	_, batch := tracer.Start(context.Background(), telemetry.SpanBatch, trace.WithLinks(links...))
	batch.End()

	spans := tel.Spans()
	got := spans[len(spans)-1]
	if len(got.Links) != len(want) {
		t.Fatalf("batch span has %d links, want %d", len(got.Links), len(want))
	}
	for i, l := range got.Links {
		if l.SpanContext.TraceID() != want[i].TraceID() || l.SpanContext.SpanID() != want[i].SpanID() {
			t.Errorf("link %d = %s/%s, want %s/%s", i, l.SpanContext.TraceID(), l.SpanContext.SpanID(),
				want[i].TraceID(), want[i].SpanID())
		}
	}
}
