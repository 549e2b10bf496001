package mesh

import (
	"context"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go"
)

// EnqueueBatch is Enqueue of several requests at once, for a durable door
// that has them together (a Redis door's XREADGROUP block, a RESP door's
// pipelined XADDs): those that may be coalesced (coalesce.go) are stored
// in as few work messages as its bounds allow, one when the job has no
// store in flight, and the others alone, concurrently. It returns once
// every request is stored or refused: errs[i] is what Enqueue would have
// returned for reqs[i] (nil: JetStream holds it). ctx bounds every store;
// a request's trace context, when ctx has no span, is its Header's
// traceparent (a door injects its own span there).
func (c *Client) EnqueueBatch(ctx context.Context, job string, reqs []Request, resultSubject string) []error {
	errs := make([]error, len(reqs))
	if !isResultsSubject(job, resultSubject) {
		err := fmt.Errorf("%w: result subject %q not under %s", ErrInvalidConfig, resultSubject, ResultsSubject(job, ">"))
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	var (
		co    *coalescer
		idx   []int
		msgs  []*nats.Msg
		sizes []int
		ends  []func(error)
		wg    sync.WaitGroup
	)
	for i, req := range reqs {
		if errs[i] = checkRequest(job, req); errs[i] != nil {
			continue
		}
		rctx, m, end, err := c.begin(ctx, job, req, Reply{ReplyDurable, resultSubject})
		if err != nil {
			errs[i] = err
			continue
		}
		m.Header.Del(HeaderDeadline) // see Enqueue
		if cc, size := c.coalescerOf(job, req, m); cc != nil {
			co = cc
			idx, msgs, sizes, ends = append(idx, i), append(msgs, m), append(sizes, size), append(ends, end)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.storeMsg(rctx, job, m, req.MsgID)
			errs[i] = enqueueErr(job, err)
			end(errs[i])
		}()
	}
	if co != nil {
		for k, r := range co.addAll(ctx, msgs, sizes) {
			errs[idx[k]] = enqueueErr(job, r.err)
			ends[k](errs[idx[k]])
		}
	}
	wg.Wait()
	return errs
}

// enqueueErr is Enqueue's error of a store of job that returned err.
func enqueueErr(job string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("mesh: enqueue to %s: %w", job, err)
}
