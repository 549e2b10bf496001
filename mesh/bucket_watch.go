package mesh

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// watchRetry is how often Watch tries to make its consumer again after it
// broke; watchCreateTimeout bounds one try.
const (
	watchRetry         = 250 * time.Millisecond
	watchCreateTimeout = 2 * time.Second
)

// Watch keeps an index of the keys that have a result, from a consumer of
// the bucket's stream (headers only, no values), until ctx ends. Get
// answers a uri with no result from it, with no request to JetStream: the
// polls of clients waiting for a result cost a map lookup; a uri the
// index has is read from memory or the stream's leader. Each key keeps
// the revision that last put or deleted it (deletes as tombstones, for
// DuplicateWindow), so a late event never undoes a newer one; this
// process's puts and deletes enter the index as they are made, others'
// as the consumer delivers them (a moment later: the next poll finds
// them). Expired results leave markers (LimitMarkerTTL) it sees too.
//
// The consumer is pulled with a 1 s heartbeat, and made again from the
// next stream sequence within watchRetry once it misses two, is deleted
// or skips a message: the key-value watcher's push consumer, and the
// library's ordered consumer (backing off to 10 s), stayed blind for
// 10-30 s after the NATS server under them died.
//
// Watch also stores the markers of Delete in the background, publishing
// each again until it lands. It returns nil when ctx ends, or the error
// that kept it from making its first consumer; then Get asks the bucket
// for every uri again, and markers not stored yet wait for the next Watch.
func (b *ResultBucket) Watch(ctx context.Context) error {
	defer b.setReady(false)
	w := &bucketWatcher{b: b, broken: make(chan struct{}, 1)}
	if err := w.start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped before it started
		}
		return fmt.Errorf("mesh: watch results: %w", err)
	}
	defer w.stop()
	tick := time.NewTicker(deleteSettleEvery)
	defer tick.Stop()
	retry := time.NewTicker(watchRetry)
	defer retry.Stop()
	down := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			b.settleDeletes()
		case <-w.broken:
			w.stop()
			down = w.start(ctx) != nil
		case <-retry.C:
			if down {
				down = w.start(ctx) != nil
			}
		}
	}
}

// bucketWatcher is the consumer behind Watch: it notes every message in
// the index, and tells broken when it must be made again.
type bucketWatcher struct {
	b      *ResultBucket
	broken chan struct{} // buffered 1

	mu   sync.Mutex
	cc   jetstream.ConsumeContext
	name string // the consumer's, deleted when stopped
	gen  int    // the consumers made so far; a stopped one's messages are ignored
	next uint64 // the consumer sequence expected next
	last uint64 // the last stream sequence noted
}

// start makes the consumer, from the last message of every key the first
// time, from the message after the last one noted later.
func (w *bucketWatcher) start(ctx context.Context) error {
	cfg := jetstream.ConsumerConfig{
		FilterSubject:     w.b.subject + ">",
		AckPolicy:         jetstream.AckNonePolicy,
		HeadersOnly:       true,
		MemoryStorage:     true,
		Replicas:          1,
		InactiveThreshold: time.Minute,
		DeliverPolicy:     jetstream.DeliverLastPerSubjectPolicy,
	}
	w.mu.Lock()
	if w.last > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, w.last+1
	}
	w.next = 1
	w.gen++
	gen := w.gen
	w.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, watchCreateTimeout)
	defer cancel()
	cons, err := w.b.js.CreateConsumer(cctx, w.b.stream, cfg)
	if err != nil {
		return err
	}
	if info := cons.CachedInfo(); info != nil && info.NumPending == 0 {
		w.b.setReady(true) // nothing to read first
	}
	learn := func(m jetstream.Msg) { w.learn(gen, m) }
	cc, err := cons.Consume(learn, jetstream.PullExpiry(pullExpiry), jetstream.PullHeartbeat(pullHeartbeat),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if errors.Is(err, jetstream.ErrNoHeartbeat) || errors.Is(err, jetstream.ErrConsumerDeleted) ||
				errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, nats.ErrNoResponders) {
				w.breaks()
			}
		}))
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.cc, w.name = cc, cons.CachedInfo().Name
	w.mu.Unlock()
	return nil
}

func (w *bucketWatcher) breaks() {
	select {
	case w.broken <- struct{}{}:
	default:
	}
}

// stop stops the consumer and deletes it in the background (a server
// that cannot be reached drops it after its InactiveThreshold).
func (w *bucketWatcher) stop() {
	w.mu.Lock()
	cc, name := w.cc, w.name
	w.cc = nil
	w.mu.Unlock()
	if cc == nil {
		return
	}
	cc.Stop()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), watchCreateTimeout)
		defer cancel()
		_ = w.b.js.DeleteConsumer(ctx, w.b.stream, name)
	}()
}

// learn notes one message of the bucket's stream: a put, or a delete,
// purge or expiry marker. The bucket read once (nothing pending after
// it), the index serves. A skipped message breaks the consumer; one of
// an earlier consumer (gen) is ignored.
func (w *bucketWatcher) learn(gen int, m jetstream.Msg) {
	meta, err := m.Metadata()
	if err != nil {
		return
	}
	w.mu.Lock()
	if gen != w.gen {
		w.mu.Unlock()
		return
	}
	if meta.Sequence.Consumer != w.next {
		w.mu.Unlock()
		w.breaks()
		return
	}
	w.next++
	w.last = meta.Sequence.Stream
	w.mu.Unlock()
	w.b.learnt(m.Subject()[len(w.b.subject):], meta.Sequence.Stream, m.Headers(), nil)
	if meta.NumPending == 0 {
		w.b.setReady(true)
	}
}
