package mesh

import (
	"hash/fnv"
	"log/slog"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/cluster-serving/cluster-serving/infer/status"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// Results batches: the durable results of a batch work message (the
// Redis and RESP doors' records, coalesced by their Client) are stored
// together, those of one results subject in one results message
// (HeaderBatch, a body encodeBatch writes: each result's headers, its
// Nats-Msg-Id among them, and body), rather than one message and one
// PubAck each. With the file store syncing every write, a results
// stream took about one result per fsync (1-2 ms on the development
// machine's disk), which capped a durable door. The results consumers
// (ConsumeResults, ConsumeResultBatches) hand the results of such a
// message on one by one, each with its own headers, so a door sees no
// difference; their dedupe by Nats-Msg-Id works per result.

// storeResults stores the durable results held by the batch, those of
// one results subject together (at most batchLimit bytes a message; a
// result larger than that alone, as a lone record's), and returns the
// other held answers, for finish to send. An item whose result could not
// be stored goes back with its outcome's count taken back.
func (b *batch) storeResults() []callerReply {
	var rest []callerReply
	var order []string
	bySubject := map[string][]callerReply{}
	for _, cr := range b.replies {
		if cr.r.Mode != ReplyDurable {
			rest = append(rest, cr)
			continue
		}
		if _, ok := bySubject[cr.r.To]; !ok {
			order = append(order, cr.r.To)
		}
		bySubject[cr.r.To] = append(bySubject[cr.r.To], cr)
	}
	w := b.w
	limit := batchLimit(w.nc)
	for _, to := range order {
		for _, chunk := range resultChunks(bySubject[to], limit) {
			if err := b.storeChunk(to, chunk); err != nil {
				w.limit.Log(b.ctx, slog.LevelWarn, "mesh: store results; will retry", err, "results", len(chunk))
				for _, h := range chunk {
					h.cr.count.Add(^uint64(0))
					w.retried.Add(1) // as deliver counts a lone record's failed answer
					b.back = append(b.back, h.cr.it)
				}
				continue
			}
			b.answered += len(chunk)
		}
	}
	return rest
}

// heldResult is a held durable answer's result message and its size in
// a results batch.
type heldResult struct {
	cr   callerReply
	m    *nats.Msg
	size int
}

// resultChunks builds the result message of each held durable answer
// and splits them into the groups stored together: at most limit bytes
// each, a larger result alone.
func resultChunks(crs []callerReply, limit int) [][]heldResult {
	var chunks [][]heldResult
	var cur []heldResult
	size := 0
	for _, cr := range crs {
		m := resultMsg(cr.r.To, cr.it.h, cr.a.status, cr.a.body, cr.a.message)
		if id := cr.it.h.Get(HeaderMsgID); id != "" {
			m.Header.Set(HeaderMsgID, id)
		}
		h := heldResult{cr, m, entrySize(m)}
		if len(cur) > 0 && size+h.size > limit {
			chunks, cur, size = append(chunks, cur), nil, 0
		}
		cur, size = append(cur, h), size+h.size
	}
	if len(cur) > 0 {
		chunks = append(chunks, cur)
	}
	return chunks
}

// storeChunk stores a group of held durable results bound for to: a lone
// one as a lone record's (send: its own id, its body beside it when
// large), several in one results message. Each result gets its write
// span and stage time, as send gives a lone one.
func (b *batch) storeChunk(to string, chunk []heldResult) error {
	w := b.w
	if len(chunk) == 1 {
		cr := chunk[0].cr
		return w.send(cr.ctx, cr.it.h, cr.r, cr.a)
	}
	start := time.Now()
	spans := make([]trace.Span, len(chunk))
	msgs := make([]*nats.Msg, len(chunk))
	for i, h := range chunk {
		ctx, span := telemetry.Start(h.cr.ctx, stageTracer, telemetry.SpanResultWrite, trace.SpanKindProducer)
		telemetry.Inject(ctx, h.m.Header) // the door's result write joins the record's trace
		spans[i], msgs[i] = span, h.m
	}
	m := nats.NewMsg(to)
	m.Header.Set(HeaderBatch, strconv.Itoa(len(msgs)))
	m.Data = encodeBatch(msgs)
	err := w.storeResult(b.ctx, to, m, b.resultsID(chunk))
	for i, h := range chunk {
		if err == nil {
			w.answered.add(answerKey(h.cr.r, h.cr.it.h)) // see answerKey
		}
		telemetry.EndSpan(spans[i], err)
		w.cfg.Metrics.RecordStage(h.cr.ctx, telemetry.StageResultWrite, w.cfg.Stream.Job, w.cfg.Model, time.Since(start))
	}
	return err
}

// resultsID is the Nats-Msg-Id of a results message of the batch: the
// batch message's id and which of its items the message holds, so that
// the batch run again stores the same results once, and a message of
// other items (some went back on one run) is not taken for it.
func (b *batch) resultsID(chunk []heldResult) string {
	id := b.msg.Headers().Get(HeaderMsgID)
	if id == "" {
		return nuid.Next()
	}
	f := fnv.New64a()
	for _, h := range chunk {
		i := h.cr.it.i
		_, _ = f.Write([]byte{byte(i), byte(i >> 8), byte(i >> 16), byte(i >> 24)})
	}
	return id + ".r" + strconv.Itoa(len(chunk)) + "." + strconv.FormatUint(f.Sum64(), 36)
}

// resultsOf reads a results message: a lone result (resultOf), or each
// result of a results batch with its own headers, appended to into. A
// batch that cannot be read (only a worker writes them) is one 500 result
// without a uri, which no door has a key to answer under.
func resultsOf(js jetstream.JetStream, msg jetstream.Msg, into []Result) []Result {
	if msg.Headers().Get(HeaderBatch) == "" {
		return append(into, resultOf(js, msg))
	}
	entries, err := decodeBatch(msg.Data())
	if err != nil {
		return append(into, Result{Status: status.Internal, Message: err.Error(), Header: msg.Headers()})
	}
	for _, e := range entries {
		r := parseResult(e.h, e.data)
		r.Header = e.h
		into = append(into, r)
	}
	return into
}
