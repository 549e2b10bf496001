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
	if err := ValidateJob(job); err != nil {
		return err
	}
	if !isResultsSubject(job, filterSubject) {
		return fmt.Errorf("%w: filter subject %q not under %s", ErrInvalidConfig, filterSubject, ResultsSubject(job, ">"))
	}
	stream := ResultsStreamName(job)
	cons, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Durable:       durableName,
		AckPolicy:     jetstream.AckExplicitPolicy,
		FilterSubject: filterSubject,
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		return fmt.Errorf("mesh: results consumer %s/%s: %w", stream, durableName, err)
	}
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		if ctx.Err() != nil {
			_ = msg.Nak()
			return
		}
		r := parseResult(msg.Headers(), msg.Data())
		r.Header = msg.Headers()
		if err := handle(ctx, r); err != nil {
			_ = msg.NakWithDelay(DefaultBackoff)
			return
		}
		_ = msg.Ack()
	})
	if err != nil {
		return fmt.Errorf("mesh: consume %s: %w", stream, err)
	}
	<-ctx.Done()
	cc.Drain()
	<-cc.Closed()
	return nil
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
	if err := ValidateJob(job); err != nil {
		return err
	}
	if !isResultsSubject(job, filterSubject) {
		return fmt.Errorf("%w: filter subject %q not under %s", ErrInvalidConfig, filterSubject, ResultsSubject(job, ">"))
	}
	if maxBatch <= 0 {
		maxBatch = 64
	}
	stream := ResultsStreamName(job)
	cons, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Durable:       durableName,
		AckPolicy:     jetstream.AckExplicitPolicy,
		FilterSubject: filterSubject,
		// A batch is one quick write; results a killed door held come back
		// to its successor after this.
		AckWait: ResultsAckWait,
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		return fmt.Errorf("mesh: results consumer %s/%s: %w", stream, durableName, err)
	}
	// The callback only hands messages over; the loop below batches them.
	// It blocks while the loop is busy, which bounds what is held here.
	msgs := make(chan jetstream.Msg, maxBatch)
	stopped := make(chan struct{})
	defer close(stopped)
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		select {
		case msgs <- msg:
		case <-stopped: // not acked: redelivered after ResultsAckWait
		}
	}, jetstream.PullMaxMessages(2*maxBatch))
	if err != nil {
		return fmt.Errorf("mesh: consume %s: %w", stream, err)
	}
	batch := make([]jetstream.Msg, 0, maxBatch)
	results := make([]Result, 0, maxBatch)
	flush := func(hctx context.Context) {
		if len(batch) == 0 {
			return
		}
		results = results[:0]
		for _, m := range batch {
			r := parseResult(m.Headers(), m.Data())
			r.Header = m.Headers()
			results = append(results, r)
		}
		err := handle(hctx, results)
		for _, m := range batch {
			if err != nil {
				_ = m.NakWithDelay(DefaultBackoff)
			} else {
				_ = m.Ack()
			}
		}
		batch = batch[:0]
	}
	// collect adds what is already waiting, up to maxBatch, without blocking.
	collect := func() {
		for len(batch) < maxBatch {
			select {
			case m := <-msgs:
				batch = append(batch, m)
			default:
				return
			}
		}
	}
	for {
		select {
		case m := <-msgs:
			batch = append(batch, m)
			collect()
			flush(ctx)
			continue
		case <-ctx.Done():
		}
		break
	}
	// Stop pulling; results already delivered are still written. A drain
	// cannot finish while NATS is away: give up on it after a while.
	hctx := context.WithoutCancel(ctx)
	go cc.Drain()
	giveUp := time.NewTimer(resultsDrainTimeout)
	defer giveUp.Stop()
	for {
		select {
		case m := <-msgs:
			batch = append(batch, m)
			collect()
			flush(hctx)
		case <-cc.Closed():
			collect()
			flush(hctx)
			return nil
		case <-giveUp.C:
			cc.Stop()
			collect()
			flush(hctx)
			return nil
		}
	}
}

// resultsDrainTimeout bounds how long ConsumeResultBatches drains on stop.
const resultsDrainTimeout = 5 * time.Second

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
