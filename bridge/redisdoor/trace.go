package redisdoor

import (
	"context"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

var tracer = otel.Tracer(telemetry.ScopeName + "/bridge/redisdoor")

// receiveSpan starts the consumer span of one stream entry, the child of
// the entry's traceparent field when it has one.
func (d *Door) receiveSpan(ctx context.Context, id string, req mesh.Request) (context.Context, trace.Span) {
	ctx = telemetry.Extract(ctx, req.Header)
	ctx, span := telemetry.Start(ctx, tracer, telemetry.SpanDoorRedis, trace.SpanKindConsumer)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("messaging.system", "redis"), attribute.String("messaging.destination.name", d.cfg.Job),
			attribute.String("messaging.message.id", id), attribute.String("cluster_serving.uri", spanURI(req.URI)),
			telemetry.AttrJob.String(d.cfg.Job))
	}
	return ctx, span
}

// maxSpanURI bounds the uri a span carries: a uri may be any length a
// client sends, and span attributes are kept in memory and exported.
const maxSpanURI = 256

// spanURI is uri cut to maxSpanURI bytes.
func spanURI(uri string) string {
	if len(uri) > maxSpanURI {
		return uri[:maxSpanURI]
	}
	return uri
}

// writeSpan starts the span of one pipelined HSET batch, linked to the
// worker span of each result it writes. The links (a header parse each)
// and attributes are built only when the span records: the ratio sampler
// decides on the trace id alone.
func (d *Door) writeSpan(ctx context.Context, rs []mesh.Result) (context.Context, trace.Span) {
	ctx, span := telemetry.Start(ctx, tracer, telemetry.SpanResultDeliver, trace.SpanKindClient)
	if !span.IsRecording() {
		return ctx, span
	}
	for _, r := range rs {
		if l := telemetry.Link(r.Header); l.SpanContext.IsValid() {
			span.AddLink(l)
		}
	}
	span.SetAttributes(attribute.Int("cluster_serving.results", len(rs)), telemetry.AttrJob.String(d.cfg.Job))
	return ctx, span
}

// recordResults counts written results by outcome, with the time from the
// client's XADD (the entry id's milliseconds) to the write.
func (d *Door) recordResults(ctx context.Context, rs []mesh.Result) {
	if d.cfg.Metrics == nil {
		return
	}
	now := time.Now()
	for _, r := range rs {
		if r.URI == "" {
			continue
		}
		var took time.Duration
		if added, ok := entryTime(r.Header.Get(mesh.HeaderMsgID)); ok {
			took = now.Sub(added)
		}
		d.cfg.Metrics.RecordRequest(ctx, telemetry.DoorRedis, d.cfg.Job, telemetry.OutcomeOf(r.Status), took)
		if r.Status >= 400 { // the record's own trace, from its result's traceparent
			d.cfg.Metrics.RecordError(telemetry.Extract(ctx, r.Header), telemetry.DoorRedis, d.cfg.Job, r.Status, r.Message)
		}
	}
}

// entryTime reads the XADD time from a message id "<job>:<ms>-<seq>".
func entryTime(msgID string) (time.Time, bool) {
	i := strings.LastIndexByte(msgID, ':')
	ms, _, ok := strings.Cut(msgID[i+1:], "-")
	if !ok {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(n), true
}
