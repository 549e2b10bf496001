package mesh

import (
	"context"
	"fmt"

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
		if err := handle(ctx, parseResult(msg.Headers(), msg.Data())); err != nil {
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
