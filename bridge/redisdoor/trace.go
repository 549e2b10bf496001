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

// CarrySpan writes the span context of ctx, when it has one, into req's
// headers: the records of one mesh.Client.EnqueueBatch share its ctx, and
// the mesh continues each one's trace from its own headers. The RESP
// door's XADDs use it too.
func CarrySpan(ctx context.Context, req *mesh.Request) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	if req.Header == nil {
		req.Header = map[string][]string{}
	}
	telemetry.Inject(ctx, req.Header)
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

// writeSpan starts the span of one pipelined HSET batch (ResultSpan).
func (d *Door) writeSpan(ctx context.Context, rs []mesh.Result) (context.Context, trace.Span) {
	return ResultSpan(ctx, tracer, telemetry.SpanResultDeliver, d.cfg.Job, rs)
}

// ResultSpan starts the span name of one batch of result writes of job,
// linked to the worker span of each result it writes. The links (a header
// parse each) and attributes are built only when the span records: the
// ratio sampler decides on the trace id alone. The RESP door's puts use
// it too.
func ResultSpan(ctx context.Context, tracer trace.Tracer, name, job string, rs []mesh.Result) (context.Context, trace.Span) {
	ctx, span := telemetry.Start(ctx, tracer, name, trace.SpanKindClient)
	if !span.IsRecording() {
		return ctx, span
	}
	for _, r := range rs {
		if l := telemetry.Link(r.Header); l.SpanContext.IsValid() {
			span.AddLink(l)
		}
	}
	span.SetAttributes(attribute.Int("cluster_serving.results", len(rs)), telemetry.AttrJob.String(job))
	return ctx, span
}

// recordResults counts written results (RecordResults).
func (d *Door) recordResults(ctx context.Context, rs []mesh.Result) {
	RecordResults(ctx, d.cfg.Metrics, telemetry.DoorRedis, d.cfg.Job, rs)
}

// RecordResults counts the results of job that door wrote (those with a
// uri) on m (nil: none) by outcome, with the time from the client's XADD
// (EntryTime of the result's message id) to the write, and records the
// failed ones' errors. The RESP door counts its results with it too.
func RecordResults(ctx context.Context, m *telemetry.Metrics, door, job string, rs []mesh.Result) {
	if m == nil {
		return
	}
	now := time.Now()
	for _, r := range rs {
		if r.URI == "" {
			continue
		}
		var took time.Duration
		if added, ok := EntryTime(r.Header.Get(mesh.HeaderMsgID)); ok {
			took = now.Sub(added)
		}
		m.RecordRequest(ctx, door, job, telemetry.OutcomeOf(r.Status), took)
		if r.Status >= 400 { // the record's own trace, from its result's traceparent
			m.RecordError(telemetry.Extract(ctx, r.Header), door, job, r.Status, r.Message)
		}
	}
}

// EntryTime reads the XADD time from a message id that ends with
// ":<ms>-<seq>" (the Redis door's <job>:<entry id>, and the RESP door's).
func EntryTime(msgID string) (time.Time, bool) {
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
