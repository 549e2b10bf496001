package mesh

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// held is the set of records a worker holds, from the moment its consume
// callback receives one (waiting at the gate, in Predict, publishing its
// result) until it is settled. One ticker beats them all with
// InProgress, so that JetStream does not hand a record a healthy worker
// holds to another worker after AckWait: a busy worker's queued records
// would otherwise run twice. A record's beats stop at its bound (the
// caller's deadline, or maxAttempt AckWaits into its attempt), so that a
// hung Predict cannot hold it for ever. Safe for concurrent use.
type held struct {
	mu   sync.Mutex
	msgs map[jetstream.Msg]time.Time // → beat until; zero: no bound yet
}

func newHeld() *held { return &held{msgs: map[jetstream.Msg]time.Time{}} }

// add starts beating msg.
func (h *held) add(msg jetstream.Msg) {
	h.mu.Lock()
	h.msgs[msg] = time.Time{}
	h.mu.Unlock()
}

// bound stops beating msg after until.
func (h *held) bound(msg jetstream.Msg, until time.Time) {
	h.mu.Lock()
	if _, ok := h.msgs[msg]; ok {
		h.msgs[msg] = until
	}
	h.mu.Unlock()
}

// remove stops beating msg. Call it before the record's ack, nak or term,
// so that no beat goes out after it; but for an ack the worker waits to
// see confirmed (confirmAck), after it.
func (h *held) remove(msg jetstream.Msg) {
	h.mu.Lock()
	delete(h.msgs, msg)
	h.mu.Unlock()
}

// beat sends InProgress for every held record within its bound. The lock
// is held while it does, so a beat never crosses a settle; InProgress
// only queues a publish.
func (h *held) beat(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for msg, until := range h.msgs {
		if until.IsZero() || now.Before(until) {
			_ = msg.InProgress()
		}
	}
}

// run beats every interval until ctx ends. A record received just after a
// beat waits up to one interval for its first: keep interval well under
// AckWait (the worker uses a third).
func (h *held) run(ctx context.Context, interval time.Duration) {
	every(ctx, interval, h.beat)
}

// every calls fn with the time each period until ctx ends.
func every(ctx context.Context, period time.Duration, fn func(time.Time)) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case now := <-t.C:
			fn(now)
		case <-ctx.Done():
			return
		}
	}
}

// causeLog logs a repeating error once per cause rather than per retry: a
// partition without a leader fails every pull until it elects one, with
// a few causes in turn (no heartbeat, no responders). Within one run of
// errors for a key each cause is logged once; when the errors stop, it
// logs once that the key recovered and how many errors it swallowed.
// Safe for concurrent use.
type causeLog struct {
	log *slog.Logger
	mu  sync.Mutex
	// failing holds, per key (a partition's stream) in a run of errors,
	// the causes logged and the errors seen.
	failing map[string]*causeRun
}

type causeRun struct {
	causes map[string]bool
	errors int
}

func newCauseLog(log *slog.Logger) *causeLog {
	return &causeLog{log: log, failing: map[string]*causeRun{}}
}

// report logs err for key unless its cause was logged already in key's
// current run of errors.
func (c *causeLog) report(key, msg string, err error) {
	cause := err.Error()
	c.mu.Lock()
	defer c.mu.Unlock()
	run := c.failing[key]
	if run == nil {
		run = &causeRun{causes: map[string]bool{}}
		c.failing[key] = run
	}
	run.errors++
	if run.causes[cause] {
		return
	}
	run.causes[cause] = true
	c.log.Warn(msg, "stream", key, "err", cause)
}

// ok ends key's run of errors, logging once that it recovered.
func (c *causeLog) ok(key, msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	run := c.failing[key]
	if run == nil {
		return
	}
	c.log.Info(msg, "stream", key, "errors", run.errors)
	delete(c.failing, key)
}
