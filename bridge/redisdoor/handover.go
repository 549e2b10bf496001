package redisdoor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/cluster-serving/cluster-serving/infer/status"

	goredis "github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/cluster-serving/cluster-serving/infer/modelconfig"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/mesh"
)

// handover counts what became of one block of entries.
type handover struct {
	stored   int // the mesh holds them
	answered int // answered by the door itself (NaN), or acked without a uri
	left     int // not handed over in time (transient failure): still pending
}

// stuck reports whether the mesh took none of the block and some of it is
// left: the mesh is away or full, not the entries at fault.
func (h handover) stuck() bool { return h.stored == 0 && h.left > 0 }

// serve hands msgs to the mesh concurrently, then XACKs and XDELs those
// the mesh stored and those answered NaN. An entry whose hand-over failed
// for a transient reason, or was cut short by ctx, stays pending: it is
// retried, by this run or by the next one.
func (d *Door) serve(ctx context.Context, msgs []goredis.XMessage, skipped bool) handover {
	done, bad, h := d.handOver(ctx, msgs, skipped)
	// Ack even after ctx ended: what the mesh holds must leave the stream.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.Timeout)
	defer cancel()
	// A bad entry leaves the stream only once its NaN is written; until
	// then it stays pending and retryOwnPending tries again.
	if len(bad) > 0 && d.answerNaN(actx, bad) {
		for _, b := range bad {
			done = append(done, b.id)
		}
	}
	if len(done) > 0 {
		d.ackAndDelete(ctx, actx, done)
	}
	return h
}

// badEntry is an entry answered NaN by the door itself.
type badEntry struct{ id, uri string }

// handOver hands msgs to the mesh together (mesh.Client.EnqueueBatch:
// one work message for the block when the job has no store in flight).
// It returns the ids the mesh stored and the entries that can never be
// queued: no uri or data, or refused by the mesh as their own fault
// (400, 404, 413). The hand-over takes at most Timeout, so a failing
// entry holds the rest of its block no longer than that.
func (d *Door) handOver(ctx context.Context, msgs []goredis.XMessage, skipped bool) (done []string, bad []badEntry, h handover) {
	done = make([]string, 0, len(msgs))
	ids := make([]string, 0, len(msgs))
	reqs := make([]mesh.Request, 0, len(msgs))
	spans := make([]trace.Span, 0, len(msgs))
	for _, m := range msgs {
		req, ok := d.request(ctx, m)
		if !ok {
			bad = append(bad, badEntry{m.ID, req.URI})
			h.answered++
			continue
		}
		// The entry's optional traceparent field makes this span the
		// client's child; the mesh continues it from the request's
		// headers (CarrySpan).
		sctx, span := d.receiveSpan(ctx, m.ID, req)
		CarrySpan(sctx, &req)
		ids, reqs, spans = append(ids, m.ID), append(reqs, req), append(spans, span)
	}
	if len(reqs) == 0 {
		return done, bad, h
	}
	for i, o := range d.enqueue(ctx, reqs) {
		spans[i].End()
		switch o {
		case stored:
			done = append(done, ids[i])
			h.stored++
		case rejected:
			bad = append(bad, badEntry{ids[i], reqs[i].URI})
			h.answered++
		default:
			h.left++
		}
	}
	d.enqueued.Add(int64(h.stored))
	if skipped {
		d.skipped.Add(int64(h.stored))
	}
	return done, bad, h
}

// answerNaN writes NaN as the result of each bad entry that has a uri, in
// one pipeline, and reports whether Redis took them all.
func (d *Door) answerNaN(ctx context.Context, bad []badEntry) bool {
	cmds, _ := d.rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, b := range bad {
			if b.uri != "" {
				p.HSet(ctx, ResultKey(d.cfg.Job, b.uri), ResultField, NaN)
			}
		}
		return nil
	})
	for _, c := range cmds {
		if c.Err() != nil {
			d.lim.Log(ctx, slog.LevelWarn, "writing NaN for bad entries; they stay pending and are retried", c.Err(), "entries", len(bad))
			return false
		}
	}
	return true
}

// ackAndDelete XACKs and XDELs ids with actx, retrying a few times unless
// ctx (the door's) ended.
func (d *Door) ackAndDelete(ctx, actx context.Context, ids []string) {
	for attempt := 0; ; attempt++ {
		_, err := d.rdb.Pipelined(actx, func(p goredis.Pipeliner) error {
			p.XAck(actx, d.cfg.Job, Group, ids...)
			p.XDel(actx, d.cfg.Job, ids...)
			return nil
		})
		if err == nil {
			return
		}
		if attempt >= 3 || ctx.Err() != nil {
			// They stay pending; the next reclaim hands them over again and
			// their message ids keep them from running twice.
			d.lim.Log(ctx, slog.LevelWarn, "XACK/XDEL; entries stay pending", err, "entries", len(ids))
			return
		}
		d.sleep(actx, d.cfg.RetryInterval)
	}
}

// maxTraceField bounds a traceparent or tracestate field passed on as a
// header: W3C allows 55 and 512 bytes.
const maxTraceField = 512

// EntryRequest is the mesh request of a stream entry's fields (SPEC §2):
// uri, data as it came, its content type from serde (stream: JSON
// instances; otherwise base64 Arrow), and the optional traceparent and
// tracestate fields as headers; msgID is its JetStream message id. A
// field value that is not a string counts as absent. The RESP door builds
// its XADDs' requests with it too.
func EntryRequest(values map[string]any, msgID string) mesh.Request {
	uri, _ := values["uri"].(string)
	data, _ := values["data"].(string)
	serde, _ := values["serde"].(string)
	req := mesh.Request{URI: uri, Body: []byte(data), MsgID: msgID, ContentType: wire.MediaTypeRedisArrow}
	if serde == "stream" {
		req.ContentType = wire.MediaTypeRedisJSON
	}
	for _, k := range []string{mesh.HeaderTraceParent, mesh.HeaderTraceState} {
		// A field a header cannot carry as it is would be changed or
		// refused on the way: the record goes on without it.
		if v, ok := values[k].(string); ok && v != "" && len(v) <= maxTraceField && mesh.EncodeURI(v) == v {
			if req.Header == nil {
				req.Header = map[string][]string{}
			}
			req.Header[k] = []string{v}
		}
	}
	return req
}

// EntrySchedule is where an entry waits in the mesh: its optional
// priority and timeout fields (Triton's request parameters: a priority
// level, 1 the highest; microseconds in the queue) placed in its model's
// queue q, as the HTTP and gRPC doors place theirs. Without them the
// model's own default level and queue policy apply. A field that is not
// an unsigned integer is an error naming it.
func EntrySchedule(values map[string]any, q modelconfig.Queue) (mesh.Schedule, error) {
	if !q.Used() {
		return mesh.Schedule{}, nil
	}
	p, _ := values["priority"].(string)
	t, _ := values["timeout"].(string)
	sched, err := mesh.ParseSchedule(q, p, t)
	if err != nil {
		return mesh.Schedule{}, fmt.Errorf("fields priority, timeout: %w", err)
	}
	return sched, nil
}

// request builds the mesh request of one entry; ok is false without uri
// or data, which it logs (an entry without fields was deleted already: it
// is only acked).
func (d *Door) request(ctx context.Context, m goredis.XMessage) (mesh.Request, bool) {
	req := EntryRequest(m.Values, d.cfg.Job+":"+m.ID)
	if d.cfg.Queue != nil {
		var err error
		if req.Schedule, err = EntrySchedule(m.Values, d.cfg.Queue(d.cfg.Job)); err != nil {
			d.lim.Log(ctx, slog.LevelWarn, "entry queued at its model's default priority and timeout", err, "id", m.ID)
		}
	}
	uri, data := req.URI, req.Body
	ok := uri != "" && len(data) != 0
	switch {
	case ok || len(m.Values) == 0:
	case uri == "":
		d.bad.Add(1)
		d.lim.Log(ctx, slog.LevelWarn, "entry without uri: acked, no result can be written", nil, "id", m.ID)
	default:
		d.bad.Add(1)
		d.lim.Log(ctx, slog.LevelWarn, "entry without data: answering NaN", nil, "id", m.ID, "uri", logURI(uri))
	}
	return req, ok
}

// maxLoggedURI bounds the example uri a log line shows.
const maxLoggedURI = 128

// logURI writes uri for a log line escaped as %q does (control and
// non-UTF-8 bytes visible, unambiguous), without the quotes the log
// handler adds itself, cut to maxLoggedURI bytes.
func logURI(uri string) string {
	q := strconv.Quote(uri)
	if len(uri) > maxLoggedURI {
		q = strconv.Quote(uri[:maxLoggedURI])
		return fmt.Sprintf("%s... (%d bytes)", q[1:len(q)-1], len(uri))
	}
	return q[1 : len(q)-1]
}

// outcome is what became of one entry's hand-over.
type outcome int

const (
	stored   outcome = iota // the mesh holds it: ack and delete
	rejected                // it can never be queued: answer NaN, ack and delete
	left                    // not handed over (transient, stopped, misconfigured): it stays pending
)

// enqueue hands reqs to the mesh together, retrying those that failed
// for a transient reason (a full work queue, NATS unreachable) for at
// most Timeout in all; then, or when ctx ends, they are left pending. The
// attempt in flight when ctx ends is finished, not abandoned. A refusal
// that is the request's fault (400, 404, 413: a uri over
// mesh.MaxURIBytes, a body over the NATS max payload) is not retried. It
// returns each request's outcome.
func (d *Door) enqueue(ctx context.Context, reqs []mesh.Request) []outcome {
	subject := mesh.ResultsSubject(d.cfg.Job, DoorName)
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.Timeout)
	defer cancel()
	out := make([]outcome, len(reqs))
	todo := make([]int, len(reqs))
	for i := range todo {
		todo[i] = i
	}
	batch := reqs
	for {
		var again []int
		for k, err := range d.m.EnqueueBatch(ectx, d.cfg.Job, batch, subject) {
			i := todo[k]
			var retry bool
			out[i], retry = d.outcomeOf(ctx, reqs[i], err)
			if retry {
				again = append(again, i)
			}
		}
		if len(again) == 0 {
			return out
		}
		d.sleep(ectx, d.cfg.RetryInterval)
		if ctx.Err() != nil || ectx.Err() != nil {
			return out
		}
		todo, batch = again, make([]mesh.Request, len(again))
		for k, i := range again {
			batch[k] = reqs[i]
		}
	}
}

// outcomeOf is what becomes of req after the mesh answered err to its
// hand-over, and whether to try it again.
func (d *Door) outcomeOf(ctx context.Context, req mesh.Request, err error) (o outcome, retry bool) {
	switch st := status.Of(err); {
	case err == nil:
		return stored, false
	case errors.Is(err, mesh.ErrInvalidJob) || errors.Is(err, mesh.ErrInvalidConfig):
		d.lim.Log(ctx, slog.LevelError, "enqueue refused; entries stay pending", err)
		return left, false
	case st == status.BadInput || st == status.NotFound || st == status.TooLarge:
		d.bad.Add(1)
		d.lim.Log(ctx, slog.LevelWarn, "record answered NaN: the mesh refused it", err, "uri", logURI(req.URI), "body_bytes", len(req.Body))
		return rejected, false
	case errors.Is(err, mesh.ErrQueueFull):
		d.lim.Log(ctx, slog.LevelWarn, "work queue full; entries stay pending and are retried", nil)
	default:
		d.lim.Log(ctx, slog.LevelWarn, "enqueue; entries stay pending and are retried", err)
	}
	return left, true
}
