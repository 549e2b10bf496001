package mesh

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cluster-serving/cluster-serving/infer/status"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Defaults of the partition router (ClientConfig.AttemptTimeout and the
// worker's result publishes).
const (
	// DefaultAttemptTimeout bounds one publish attempt to one partition.
	// A healthy replicated stream acks in milliseconds; a stream without a
	// leader never does. 750ms leaves a loaded cluster room without letting
	// a dead leader hold a caller long.
	DefaultAttemptTimeout = 750 * time.Millisecond
	// skipFor is how long a partition that just failed is tried last, so
	// that later requests do not each pay its timeout while it elects a
	// leader (4-9 s).
	skipFor = 3 * time.Second
	// roundBackoff is the first pause after every partition failed in a
	// row (for example no stream answers at all); it doubles to roundMax.
	roundBackoff = 50 * time.Millisecond
	roundMax     = time.Second
)

// router publishes to whichever partition of a set answers: it starts at
// the partition a message's id hashes to (or the next in round-robin),
// bounds each attempt by attempt, and remembers partitions that just
// failed so that later publishes try them last. Safe for concurrent use.
type router struct {
	attempt time.Duration
	now     func() time.Time // time.Now; tests set a clock
	rr      atomic.Uint32

	mu  sync.Mutex
	bad map[string]time.Time // subject → until when it is tried last
}

func newRouter(attempt time.Duration) *router {
	return &router{attempt: attempt, now: time.Now, bad: map[string]time.Time{}}
}

// next returns a round-robin start among n partitions.
func (r *router) next(n int) int { return int(r.rr.Add(1) % uint32(n)) }

// order returns the partitions to try, given their subjects and the
// first choice: the healthy ones in ring order from first, then the ones
// that failed lately, the one failed longest ago first.
func (r *router) order(subjects []string, first int) []int {
	n := len(subjects)
	now := r.now()
	healthy := make([]int, 0, n)
	var skipped []int
	r.mu.Lock()
	until := make([]time.Time, n)
	for i := range n {
		p := (first + i) % n
		if t, ok := r.bad[subjects[p]]; ok && now.Before(t) {
			until[p] = t
			skipped = append(skipped, p)
			continue
		}
		delete(r.bad, subjects[p])
		healthy = append(healthy, p)
	}
	r.mu.Unlock()
	slices.SortStableFunc(skipped, func(a, b int) int { return until[a].Compare(until[b]) })
	return append(healthy, skipped...)
}

// failed marks subject's partition to be tried last for skipFor.
func (r *router) failed(subject string) {
	r.mu.Lock()
	r.bad[subject] = r.now().Add(skipFor)
	r.mu.Unlock()
}

// stored is what a successful publish reports.
type stored struct {
	ack *jetstream.PubAck
	// partition took the message.
	partition int
	// retried is true when this partition had been tried before in the
	// same publish: a duplicate ack then means an earlier attempt stored it.
	retried bool
}

// publish stores m in one of the partitions whose subjects are given,
// starting at first, until one acks or ctx ends. m must carry a
// Nats-Msg-Id, so that a retry to a partition that stored it already
// stores once. It waits while nc reconnects rather than pile copies into
// the reconnect buffer. Errors: status.ErrTooLarge (never retried),
// ErrQueueFull when every partition is full (ErrNoStorage when the last
// one's server had no storage left), ErrUnavailable when ctx
// ended before any partition stored it, or a permanent publish error.
func (r *router) publish(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, subjects []string, first int, m *nats.Msg) (stored, error) {
	tried := make([]bool, len(subjects))
	var last error
	pause := roundBackoff
	// A batch of callers' requests is pinned as a caller's m is.
	caller := replyOf(m.Header).Mode == ReplyCaller || m.Header.Get(HeaderBatchCallers) != ""
	pinned := -1 // the partition that may hold m already, for a caller's m
	for {
		full := 0
		order := r.order(subjects, first)
		if pinned >= 0 {
			order = []int{pinned}
		}
		for _, p := range order {
			if err := waitConnected(ctx, nc); err != nil {
				return stored{}, unavailable(last, err)
			}
			m.Subject = subjects[p]
			actx, cancel := context.WithTimeout(ctx, r.attempt)
			ack, err := js.PublishMsg(actx, m, jetstream.WithRetryAttempts(0))
			cancel()
			if err == nil {
				return stored{ack: ack, partition: p, retried: tried[p]}, nil
			}
			tried[p] = true
			err = mapPublishErr(err)
			switch {
			case errors.Is(err, status.ErrTooLarge):
				return stored{}, err
			case errors.Is(err, ErrQueueFull) || errors.Is(err, ErrNoStorage):
				full++ // this partition is full; another may not be
				if pinned >= 0 {
					// A copy stored earlier would have been found first
					// (Nats-Msg-Id): there is none, any partition may take m.
					pinned, full = -1, 0
				}
			case ctx.Err() != nil:
				return stored{}, unavailable(cmpErr(last, err), ctx.Err())
			case !transient(err):
				return stored{}, err
			case caller && unknownFate(err):
				// The attempt timed out: the partition may have stored m
				// (its leader died before the PubAck left). Another would
				// store a second copy whose worker answers the caller a
				// second time, with nothing between to drop it; asked
				// again, this partition stores m once (Nats-Msg-Id) or
				// says it has it. A door's inbox and the durable results
				// drop such copies, so only a caller's m is pinned.
				pinned = p
				r.failed(subjects[p])
			default:
				r.failed(subjects[p])
			}
			last = err
			if pinned >= 0 {
				break
			}
		}
		if full == len(subjects) {
			return stored{}, last
		}
		select {
		case <-time.After(pause):
			pause = min(2*pause, roundMax)
		case <-ctx.Done():
			return stored{}, unavailable(last, ctx.Err())
		}
	}
}

// unknownFate reports whether a publish error leaves it unknown whether
// the stream stored the message: the attempt timed out waiting for the
// PubAck. No responders, or a stream's refusal, stored nothing.
func unknownFate(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// unavailable is the error of a publish that no partition stored before
// ctx ended: a 503 for the caller, who may retry.
func unavailable(last, cause error) error {
	if last == nil {
		last = cause
	}
	return fmt.Errorf("%w: %v", ErrUnavailable, last)
}

// jsErrCodeDupInProcess is nats-server's JSStreamDuplicateMessageConflict.
const jsErrCodeDupInProcess jetstream.ErrorCode = 10158

// transient reports whether a publish error may pass on another partition
// or later: no responders, timeouts, a stream without a leader, a
// connection between servers. A JetStream API error with a 4xx code other
// than 408 is a refusal that no retry changes, but for 409 "duplicate
// message id is in process": an earlier attempt of this very message is
// still being stored (its leader was replaced meanwhile); asked again, the
// stream answers with the stored copy's PubAck.
func transient(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.Code >= 500 || apiErr.Code == 408 || apiErr.Code == 0 || apiErr.ErrorCode == jsErrCodeDupInProcess
	}
	return !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrBadSubject) &&
		!errors.Is(err, jetstream.ErrInvalidJSAck)
}

// waitConnected returns nil once nc is connected, or ctx's error. A
// publish while nc reconnects would wait in the reconnect buffer and go
// out later, after its attempt had already been given up for another
// partition: a second copy.
func waitConnected(ctx context.Context, nc *nats.Conn) error {
	for !nc.IsConnected() {
		if nc.IsClosed() {
			return nats.ErrConnectionClosed
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
