package mesh

import (
	"github.com/cluster-serving/cluster-serving/infer/status"

	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ConsumeResults feeds results of job to handle through the durable pull
// consumer durableName on each of the job's results partitions, filtered
// to filterSubject (for example ResultsSubject(job, "redis"); each
// partition gets its own mapping of it), each result of a results batch
// message (results_batch.go) on its own. A result is acked once handle
// returns nil and nakked with a delay otherwise, so a durable door never
// loses one; a result whose Nats-Msg-Id was written within DuplicateWindow
// is acked without handle (see recentIDs). It blocks until ctx ends, then
// drains and returns nil; it returns an error only when it cannot start.
// handle runs on one goroutine at a time.
func ConsumeResults(ctx context.Context, js jetstream.JetStream, job, durableName, filterSubject string, handle func(context.Context, Result) error) error {
	n, err := resultPartitions(ctx, js, job, filterSubject)
	if err != nil || n == 0 {
		return err
	}
	var mu sync.Mutex
	seen := newRecentIDs(DuplicateWindow, maxRecentIDs)
	stopping := make(chan struct{})
	cs := resultsConsumers(js, job, durableName, filterSubject, 0, stopping, 256)
	cs.handle = func(msg jetstream.Msg) {
		if ctx.Err() != nil {
			_ = msg.Nak()
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, r := range resultsOf(js, msg, nil) {
			id, now := r.Header.Get(HeaderMsgID), time.Now()
			if id != "" && seen.has(id, now) {
				continue // written already, from another partition
			}
			if err := handle(ctx, r); err != nil {
				_ = msg.NakWithDelay(DefaultBackoff)
				return
			}
			seen.add(id, now)
		}
		_ = msg.Ack()
	}
	cs.start(ctx, n)
	<-ctx.Done()
	close(stopping)
	cs.wait()
	return nil
}

// resultPartitions checks job and filterSubject and returns how many
// results partitions job has (as many as work partitions). It returns 0
// and no error when ctx ended while it started.
func resultPartitions(ctx context.Context, js jetstream.JetStream, job, filterSubject string) (int, error) {
	if err := ValidateJob(job); err != nil {
		return 0, err
	}
	if !isResultsSubject(job, filterSubject) {
		return 0, fmt.Errorf("%w: filter subject %q not under %s", ErrInvalidConfig, filterSubject, ResultsSubject(job, ">"))
	}
	n, err := Partitions(ctx, js, job)
	if ctx.Err() != nil {
		return 0, nil // stopped while starting
	}
	return n, err
}

// resultsConsumers makes the supervised consumers of durableName on each
// results partition of job, filtered to filterSubject's mapping there;
// ackWait 0 means the server's default. The caller sets handle.
func resultsConsumers(js jetstream.JetStream, job, durableName, filterSubject string, ackWait time.Duration, stopping <-chan struct{}, batch int) *consumers {
	return &consumers{
		stream: func(p int) string { return ResultsPartitionStreamName(job, p) },
		lookup: func(ctx context.Context, p int) (jetstream.Consumer, error) {
			return js.CreateOrUpdateConsumer(ctx, ResultsPartitionStreamName(job, p), jetstream.ConsumerConfig{
				Durable:       durableName,
				AckPolicy:     jetstream.AckExplicitPolicy,
				FilterSubject: ResultsPartitionSubject(job, p, filterSubject),
				AckWait:       ackWait,
			})
		},
		batch:    batch,
		causes:   newCauseLog(slog.Default().With("job", job, "consumer", durableName)),
		stopping: stopping,
		grace:    resultsDrainTimeout,
	}
}

// resultOf reads a result message, headers included, and its body from
// BodiesBucket when it travelled beside it (large.go); a body that cannot
// be read is a 500 result saying why.
func resultOf(js jetstream.JetStream, msg jetstream.Msg) Result {
	r := parseResult(msg.Headers(), msg.Data())
	r.Header = msg.Headers()
	if msg.Headers().Get(HeaderBodyRef) != "" {
		ctx, cancel := context.WithTimeout(context.Background(), resultPublishTimeout)
		defer cancel()
		body, err := (&bodies{js: js}).body(ctx, msg.Headers(), nil)
		r.Body = body
		if err != nil {
			r.Status, r.Message = status.Internal, err.Error()
		}
	}
	return r
}

// ResultsAckWait is how long ConsumeResultBatches' consumer waits for the
// ack of a delivered result before it redelivers it.
const ResultsAckWait = 10 * time.Second

// ConsumeResultBatches is ConsumeResults handing results in batches of up
// to maxBatch (default 64) messages, so that a door can write them in one
// round trip (a Redis pipeline); a results batch message (results_batch.go)
// brings all its results, so a batch may hold more than maxBatch. The
// whole batch is acked once handle returns nil and nakked with a delay
// otherwise; results already written (by Msg-Id) are left out of the
// batch and acked. When ctx ends it stops pulling, hands
// the results already delivered to handle with a ctx that is not
// cancelled (so in-flight writes finish) and returns nil; it returns an
// error only when it cannot start. handle runs on one goroutine at a time.
func ConsumeResultBatches(ctx context.Context, js jetstream.JetStream, job, durableName, filterSubject string, maxBatch int, handle func(context.Context, []Result) error) error {
	if maxBatch <= 0 {
		maxBatch = 64
	}
	n, err := resultPartitions(ctx, js, job, filterSubject)
	if err != nil || n == 0 {
		return err
	}
	// The callbacks only hand messages over; the batcher batches them.
	// They block while the batcher is busy, which bounds what is held here.
	b := &resultBatcher{
		js:      js,
		msgs:    make(chan jetstream.Msg, maxBatch),
		batch:   make([]jetstream.Msg, 0, maxBatch),
		results: make([]Result, 0, maxBatch),
		handle:  handle,
		seen:    newRecentIDs(DuplicateWindow, maxRecentIDs),
		inBatch: map[string]bool{},
	}
	stopped, stopping := make(chan struct{}), make(chan struct{})
	defer close(stopped)
	// A batch is one quick write; results a killed door held come back to
	// its successor after ResultsAckWait.
	cs := resultsConsumers(js, job, durableName, filterSubject, ResultsAckWait, stopping, max(1, 2*maxBatch/n))
	cs.handle = func(msg jetstream.Msg) {
		select {
		case b.msgs <- msg:
		case <-stopped: // not acked: redelivered after ResultsAckWait
		}
	}
	cs.start(ctx, n)
	for ctx.Err() == nil {
		select {
		case m := <-b.msgs:
			b.take(ctx, m)
		case <-ctx.Done():
		}
	}
	close(stopping)
	b.drain(context.WithoutCancel(ctx), cs)
	return nil
}

// resultsDrainTimeout bounds how long ConsumeResultBatches drains on stop.
const resultsDrainTimeout = 5 * time.Second

// resultBatcher gathers the results a consumer delivers on msgs into
// batches for handle, and settles each batch by handle's answer. One
// goroutine uses it.
type resultBatcher struct {
	js      jetstream.JetStream // reads bodies past max_payload
	msgs    chan jetstream.Msg
	batch   []jetstream.Msg
	results []Result
	handle  func(context.Context, []Result) error
	seen    *recentIDs      // ids written lately
	inBatch map[string]bool // ids of the batch being flushed
}

// take starts a batch with m and what is already waiting, up to the
// batch's capacity, and hands it to handle with ctx.
func (b *resultBatcher) take(ctx context.Context, m jetstream.Msg) {
	b.batch = append(b.batch, m)
	b.collect()
	b.flush(ctx)
}

// collect adds what is already waiting, up to the batch's capacity,
// without blocking.
func (b *resultBatcher) collect() {
	for len(b.batch) < cap(b.batch) {
		select {
		case m := <-b.msgs:
			b.batch = append(b.batch, m)
		default:
			return
		}
	}
}

// flush hands the batch to handle, then acks it, or naks it with a delay
// when handle failed. A result whose Msg-Id was written already, or is
// twice in the batch, is left out of what handle gets.
func (b *resultBatcher) flush(ctx context.Context) {
	if len(b.batch) == 0 {
		return
	}
	now := time.Now()
	b.results = b.results[:0]
	clear(b.inBatch)
	for _, m := range b.batch {
		n := len(b.results)
		b.results = resultsOf(b.js, m, b.results)
		kept := b.results[:n]
		for _, r := range b.results[n:] {
			if id := r.Header.Get(HeaderMsgID); id != "" {
				if b.inBatch[id] || b.seen.has(id, now) {
					continue
				}
				b.inBatch[id] = true
			}
			kept = append(kept, r)
		}
		b.results = kept
	}
	var err error
	if len(b.results) > 0 {
		err = b.handle(ctx, b.results)
	}
	if err == nil {
		for id := range b.inBatch {
			b.seen.add(id, now)
		}
	}
	for _, m := range b.batch {
		if err != nil {
			_ = m.NakWithDelay(DefaultBackoff)
		} else {
			_ = m.Ack()
		}
	}
	b.batch = b.batch[:0]
}

// drain writes the results the consumers still deliver while they drain
// (each within resultsDrainTimeout: a drain cannot finish while NATS is
// away), with hctx.
func (b *resultBatcher) drain(hctx context.Context, cs *consumers) {
	drained := make(chan struct{})
	go func() { cs.wait(); close(drained) }()
	for {
		select {
		case m := <-b.msgs:
			b.take(hctx, m)
		case <-drained:
			b.collect()
			b.flush(hctx)
			return
		}
	}
}

// ConsumeResults runs the package-level ConsumeResults on c's connection
// for the results the door door asked for (ResultsSubject(job, door)).
func (c *Client) ConsumeResults(ctx context.Context, job, durableName, door string, handle func(context.Context, Result) error) error {
	return ConsumeResults(ctx, c.js, job, durableName, ResultsSubject(job, door), handle)
}

// ConsumeResultBatches runs the package-level ConsumeResultBatches on c's
// connection for the results of door (ResultsSubject(job, door)).
func (c *Client) ConsumeResultBatches(ctx context.Context, job, durableName, door string, maxBatch int, handle func(context.Context, []Result) error) error {
	return ConsumeResultBatches(ctx, c.js, job, durableName, ResultsSubject(job, door), maxBatch, handle)
}
