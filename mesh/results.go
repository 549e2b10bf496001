package mesh

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ConsumeResults feeds results of job to handle through the durable pull
// consumer durableName on the results stream, filtered to filterSubject
// (for example ResultsSubject(job, "redis")). A result is acked once handle
// returns nil and nakked with a delay otherwise, so a durable door never
// loses one. It blocks until ctx ends, then drains and returns nil; it
// returns an error only when it cannot start. handle runs on one goroutine
// at a time.
func ConsumeResults(ctx context.Context, js jetstream.JetStream, job, durableName, filterSubject string, handle func(context.Context, Result) error) error {
	cons, err := resultsConsumer(ctx, js, job, durableName, filterSubject, 0)
	if err != nil || cons == nil {
		return err
	}
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		if ctx.Err() != nil {
			_ = msg.Nak()
			return
		}
		if err := handle(ctx, resultOf(msg)); err != nil {
			_ = msg.NakWithDelay(DefaultBackoff)
			return
		}
		_ = msg.Ack()
	})
	if err != nil {
		return fmt.Errorf("mesh: consume %s: %w", ResultsStreamName(job), err)
	}
	<-ctx.Done()
	cc.Drain()
	<-cc.Closed()
	return nil
}

// resultsConsumer checks job and filterSubject and creates (or updates)
// the durable consumer of job's results stream; ackWait 0 means the
// server's default. It returns a nil Consumer and no error when ctx ended
// while it started.
func resultsConsumer(ctx context.Context, js jetstream.JetStream, job, durableName, filterSubject string, ackWait time.Duration) (jetstream.Consumer, error) {
	if err := ValidateJob(job); err != nil {
		return nil, err
	}
	if !isResultsSubject(job, filterSubject) {
		return nil, fmt.Errorf("%w: filter subject %q not under %s", ErrInvalidConfig, filterSubject, ResultsSubject(job, ">"))
	}
	stream := ResultsStreamName(job)
	cons, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Durable:       durableName,
		AckPolicy:     jetstream.AckExplicitPolicy,
		FilterSubject: filterSubject,
		AckWait:       ackWait,
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil // stopped while starting
		}
		return nil, fmt.Errorf("mesh: results consumer %s/%s: %w", stream, durableName, err)
	}
	return cons, nil
}

// resultOf reads a result message, headers included.
func resultOf(msg jetstream.Msg) Result {
	r := parseResult(msg.Headers(), msg.Data())
	r.Header = msg.Headers()
	return r
}

// ResultsAckWait is how long ConsumeResultBatches' consumer waits for the
// ack of a delivered result before it redelivers it.
const ResultsAckWait = 10 * time.Second

// ConsumeResultBatches is ConsumeResults handing results in batches of up
// to maxBatch (default 64), so that a door can write them in one round trip
// (a Redis pipeline). The whole batch is acked once handle returns nil and
// nakked with a delay otherwise. When ctx ends it stops pulling, hands the
// results already delivered to handle with a ctx that is not cancelled (so
// in-flight writes finish) and returns nil; it returns an error only when
// it cannot start. handle runs on one goroutine at a time.
func ConsumeResultBatches(ctx context.Context, js jetstream.JetStream, job, durableName, filterSubject string, maxBatch int, handle func(context.Context, []Result) error) error {
	if maxBatch <= 0 {
		maxBatch = 64
	}
	// A batch is one quick write; results a killed door held come back to
	// its successor after ResultsAckWait.
	cons, err := resultsConsumer(ctx, js, job, durableName, filterSubject, ResultsAckWait)
	if err != nil || cons == nil {
		return err
	}
	// The callback only hands messages over; the batcher batches them. It
	// blocks while the batcher is busy, which bounds what is held here.
	b := &resultBatcher{
		msgs:    make(chan jetstream.Msg, maxBatch),
		batch:   make([]jetstream.Msg, 0, maxBatch),
		results: make([]Result, 0, maxBatch),
		handle:  handle,
	}
	stopped := make(chan struct{})
	defer close(stopped)
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		select {
		case b.msgs <- msg:
		case <-stopped: // not acked: redelivered after ResultsAckWait
		}
	}, jetstream.PullMaxMessages(2*maxBatch))
	if err != nil {
		return fmt.Errorf("mesh: consume %s: %w", ResultsStreamName(job), err)
	}
	for ctx.Err() == nil {
		select {
		case m := <-b.msgs:
			b.take(ctx, m)
		case <-ctx.Done():
		}
	}
	b.drain(context.WithoutCancel(ctx), cc)
	return nil
}

// resultsDrainTimeout bounds how long ConsumeResultBatches drains on stop.
const resultsDrainTimeout = 5 * time.Second

// resultBatcher gathers the results a consumer delivers on msgs into
// batches for handle, and settles each batch by handle's answer. One
// goroutine uses it.
type resultBatcher struct {
	msgs    chan jetstream.Msg
	batch   []jetstream.Msg
	results []Result
	handle  func(context.Context, []Result) error
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
// when handle failed.
func (b *resultBatcher) flush(ctx context.Context) {
	if len(b.batch) == 0 {
		return
	}
	b.results = b.results[:0]
	for _, m := range b.batch {
		b.results = append(b.results, resultOf(m))
	}
	err := b.handle(ctx, b.results)
	for _, m := range b.batch {
		if err != nil {
			_ = m.NakWithDelay(DefaultBackoff)
		} else {
			_ = m.Ack()
		}
	}
	b.batch = b.batch[:0]
}

// drain stops pulling and still writes the results already delivered,
// with hctx. A drain cannot finish while NATS is away: it gives up on it
// after resultsDrainTimeout.
func (b *resultBatcher) drain(hctx context.Context, cc jetstream.ConsumeContext) {
	go cc.Drain()
	giveUp := time.NewTimer(resultsDrainTimeout)
	defer giveUp.Stop()
	for {
		select {
		case m := <-b.msgs:
			b.take(hctx, m)
		case <-cc.Closed():
			b.collect()
			b.flush(hctx)
			return
		case <-giveUp.C:
			cc.Stop()
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
