package mesh

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cluster-serving/cluster-serving/infer/status"
	"github.com/cluster-serving/cluster-serving/infer/timing"
	"github.com/cluster-serving/cluster-serving/telemetry"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"go.opentelemetry.io/otel/trace"
)

// ReplyMode is how a worker's answer to one request goes back: the three
// reply paths of the mesh.
type ReplyMode uint8

const (
	// ReplyNone: the work message names no reply (a raw publish to the
	// work subject); the worker runs it and answers nobody.
	ReplyNone ReplyMode = iota
	// ReplyInbox: a door (HTTP, gRPC) waits on its Client's inbox for a
	// result message (Cs-Status, Cs-Error, the body): Client.Submit.
	ReplyInbox
	// ReplyDurable: the result is stored in the job's results stream with
	// a PubAck before the work is acked (the Redis door): Client.Enqueue.
	ReplyDurable
	// ReplyCaller: a NATS caller's own reply subject, answered as a micro
	// service answers (the body, or Nats-Service-Error-Code and
	// Nats-Service-Error): Client.Forward, the NATS door.
	ReplyCaller
)

// Reply is where the answer to one request goes. It travels in the work
// message's headers (Cs-Reply-To, Cs-Reply-Form, Cs-Result-To), written
// by set and read by replyOf and nowhere else, so that the three paths
// are one value on both sides of the queue.
type Reply struct {
	Mode ReplyMode
	// To is the subject the answer goes to: the door's inbox, a subject
	// under the job's results, or the caller's reply subject.
	To string
}

// set writes r into the headers of a work message.
func (r Reply) set(h nats.Header) {
	switch r.Mode {
	case ReplyInbox:
		h.Set(HeaderReplyTo, r.To)
	case ReplyDurable:
		h.Set(HeaderResultTo, r.To)
	case ReplyCaller:
		h.Set(HeaderReplyTo, r.To)
		h.Set(HeaderReplyForm, ReplyFormMicro)
	}
}

// replyOf reads where the answer to a work message goes. A durable result
// wins over a reply subject: a message carrying both (never one a Client
// built) is a record whose answer must be kept.
func replyOf(h nats.Header) Reply {
	if to := h.Get(HeaderResultTo); to != "" {
		return Reply{ReplyDurable, to}
	}
	to := h.Get(HeaderReplyTo)
	switch {
	case to == "":
		return Reply{}
	case h.Get(HeaderReplyForm) == ReplyFormMicro:
		return Reply{ReplyCaller, to}
	}
	return Reply{ReplyInbox, to}
}

// answer is what a worker sends back for one record.
type answer struct {
	status  int
	body    []byte
	message string
}

// respond sends a record's answer the way its Reply says and settles the
// record with settle (msg.Ack for a result, msg.Term for an error): the
// one replier of every reply path. An answer that cannot be sent naks the
// record (after the backoff of delivery delivered) and returns false.
// count is the outcome's counter (processed or failed): added before the
// answer leaves, so that a caller who has its answer never sees a count
// without it, and taken back when it cannot be sent.
//
// Sent first, settled after: a worker that dies between the two leaves
// the record to run again, and its answer arrives twice where something
// drops the second: a door's inbox has no waiter left for it (Submit),
// the results stream and its consumer drop a second copy by Nats-Msg-Id
// (Enqueue). A NATS caller's reply subject has nothing between to drop
// it, so that path sees its ack confirmed (confirmAck), on a goroutine
// of its own: waiting for the server's confirmation holds no Predict slot.
func (w *Worker) respond(ctx context.Context, msg jetstream.Msg, a answer, settle func() error, delivered uint64, count *atomic.Uint64) bool {
	count.Add(1)
	h := msg.Headers()
	r := replyOf(h)
	if it, ok := msg.(*batchItem); ok && (r.Mode == ReplyCaller || r.Mode == ReplyDurable) {
		it.b.reply(ctx, it, r, a, count) // sent or stored with the batch's others
		return true
	}
	if r.Mode == ReplyCaller {
		w.confirming.Add(1)
		w.spawn.run(func() {
			defer w.confirming.Done()
			if !w.deliver(ctx, msg, r, a, delivered, func() { w.confirmAck(ctx, msg) }) {
				count.Add(^uint64(0))
			}
		})
		return true
	}
	if !w.deliver(ctx, msg, r, a, delivered, func() { w.settle(msg, settle) }) {
		count.Add(^uint64(0))
		return false
	}
	return true
}

// deliver sends a to r, then settles msg with settle. An answer that
// cannot be sent naks msg (after the backoff of delivery delivered) and
// returns false.
func (w *Worker) deliver(ctx context.Context, msg jetstream.Msg, r Reply, a answer, delivered uint64, settle func()) bool {
	if err := w.send(ctx, msg.Headers(), r, a); err != nil {
		w.limit.Log(ctx, slog.LevelWarn, "mesh: send answer; will retry", err, "uri", msg.Headers().Get(HeaderURI))
		w.retried.Add(1)
		w.nak(msg, w.cfg.Stream.backoff(delivered))
		return false
	}
	settle()
	return true
}

// ackConfirmTimeout bounds one wait for the server to confirm the ack of a
// record whose answer went to a NATS caller; confirmAck asks again.
const ackConfirmTimeout = 2 * time.Second

// confirmAck settles the record of an answer sent to a NATS caller
// (ReplyCaller): it acks msg and asks again until the server confirms it,
// ctx ends or maxAttempt AckWaits pass. Answered first, so that a worker
// killed before its answer left loses nothing: the record runs again.
// Confirmed after, so that an ack lost with a NATS server (the fault
// suite's leader and cluster kills) is sent again before AckWait hands the
// record to another worker, whose run would answer the caller a second
// time, with nothing between to drop it (a door's inbox and the durable
// results drop such answers themselves, so those paths ack and go on).
// The record stays held (beaten with InProgress) meanwhile, so that
// AckWait does not run out while a new leader is elected; a beat after
// the ack is ignored by the server.
func (w *Worker) confirmAck(ctx context.Context, msg jetstream.Msg) {
	defer w.held.remove(msg)
	give := time.Now().Add(maxAttempt * w.cfg.Stream.AckWait)
	for pause := 50 * time.Millisecond; ; pause = min(2*pause, time.Second) {
		actx, cancel := context.WithTimeout(ctx, ackConfirmTimeout)
		err := msg.DoubleAck(actx)
		cancel()
		if err == nil {
			w.purge.settled(len(msg.Data()))
			return
		}
		if ctx.Err() != nil || time.Now().Add(pause).After(give) {
			w.limit.Log(ctx, slog.LevelWarn, "mesh: ack not confirmed; the record may run again and answer its NATS caller twice", err,
				"uri", msg.Headers().Get(HeaderURI))
			return
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
		}
	}
}

// send writes answer a to r: JetStream with a PubAck for a durable
// result, core NATS for an inbox or a caller; nothing for ReplyNone.
func (w *Worker) send(ctx context.Context, h nats.Header, r Reply, a answer) (err error) {
	if r.Mode == ReplyNone {
		return nil
	}
	start := time.Now()
	name := telemetry.SpanReply
	if r.Mode == ReplyDurable {
		name = telemetry.SpanResultWrite
	}
	ctx, span := telemetry.Start(ctx, stageTracer, name, trace.SpanKindProducer)
	defer func() {
		telemetry.EndSpan(span, err)
		w.cfg.Metrics.RecordStage(ctx, telemetry.StageResultWrite, w.cfg.Stream.Job, w.cfg.Model, time.Since(start))
	}()
	switch r.Mode {
	case ReplyDurable:
		m := resultMsg(r.To, h, a.status, a.body, a.message)
		if err := w.large.offload(ctx, w.cfg.Stream.Job, m); err != nil {
			return err
		}
		if err := w.storeResult(ctx, r.To, m, h.Get(HeaderMsgID)); err != nil {
			return err
		}
		w.answered.add(answerKey(r, h)) // a copy handed over again runs not (answered.go)
		return nil
	case ReplyCaller:
		if key := answerKey(r, h); key != "" && w.answered.has(key) {
			// Another worker answered the caller while this one ran a
			// copy (delivered again when the consumer's leader changed,
			// while the first run went on): same answer, sent once.
			w.answeredBefore.Add(1)
			return nil
		}
		// The NATS door's caller, answered here rather than through the
		// door: two crossings fewer (see Client.Forward).
		if err := w.nc.PublishMsg(microReply(r.To, a.status, a.body, a.message)); err != nil {
			return fmt.Errorf("reply to %s: %w", r.To, err)
		}
		w.answered.add(answerKey(r, h)) // before its ack: see answered.go
		w.cfg.Metrics.RecordAnswer(ctx, telemetry.DoorNATS, w.cfg.Stream.Job, a.status, a.message, sinceReceived(h))
		return nil
	}
	m := resultMsg(r.To, h, a.status, a.body, a.message)
	telemetry.Inject(ctx, m.Header)
	if a.status == status.OK {
		setCompute(m.Header, timing.From(ctx).Times())
	}
	if c := localClient(r.To); c != nil {
		c.take(m) // the door is in this process (local.go)
		return nil
	}
	if err := w.large.offload(ctx, w.cfg.Stream.Job, m); err != nil {
		return fmt.Errorf("reply to %s: %w", r.To, err)
	}
	if err := w.bounce.publish(m, deadlineOf(h)); err != nil {
		return fmt.Errorf("reply to %s: %w", r.To, err)
	}
	return nil
}

// sinceReceived is the time since the door took the request (Cs-Received),
// 0 when the header is missing or unreadable.
func sinceReceived(h nats.Header) time.Duration {
	ns, err := strconv.ParseInt(h.Get(HeaderReceived), 10, 64)
	if err != nil {
		return 0
	}
	return time.Since(time.Unix(0, ns))
}

// storeResult publishes m, the result of a durable record, to a results
// partition that answers, first the one the record's Msg-Id hashes to:
// the same id goes to the same partition, where JetStream drops a second
// copy (from a retried attempt, or a second run of the record). Results
// consumers drop the rare copy that lands in another partition. A subject
// outside the job's results (a raw publish) goes to partition 0 as is.
func (w *Worker) storeResult(ctx context.Context, to string, m *nats.Msg, id string) error {
	pctx, cancel := context.WithTimeout(ctx, resultPublishTimeout)
	defer cancel()
	telemetry.Inject(ctx, m.Header) // the door's result write joins the trace
	if id == "" {
		id = nuid.Next() // still, a retried attempt stores once
	}
	m.Header.Set(HeaderMsgID, id)
	job, n := w.cfg.Stream.Job, max(w.parts, 1)
	if !isResultsSubject(job, to) {
		n = 1
	}
	subjects := make([]string, n)
	for p := range n {
		subjects[p] = ResultsPartitionSubject(job, p, to)
	}
	if _, err := w.route.publish(pctx, w.nc, w.js, subjects, firstPartition(id, n), m); err != nil {
		return fmt.Errorf("result to %s: %w", to, err)
	}
	return nil
}
