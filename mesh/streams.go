package mesh

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Defaults applied by StreamConfig for zero fields.
const (
	DefaultReplicas      = 1
	DefaultMaxMsgs       = 100_000
	DefaultMaxBytes      = 1 << 30 // 1 GiB
	DefaultAckWait       = 30 * time.Second
	DefaultMaxDeliver    = 5
	DefaultMaxAckPending = 1024
	DefaultResultTTL     = 10 * time.Minute
	DefaultBackoff       = 500 * time.Millisecond
	// DuplicateWindow is how long JetStream remembers Nats-Msg-Id values.
	DuplicateWindow = 2 * time.Minute
	// maxBackoff caps the growing nak delay.
	maxBackoff = time.Minute
)

// StreamConfig describes a job's work queue, its shared consumer and its
// results stream. The zero value, with Job set, means all defaults.
type StreamConfig struct {
	// Job names the job; it must match ^[A-Za-z0-9_-]+$. Required.
	Job string
	// Replicas is the number of stream replicas. Default 1; 3 in production.
	Replicas int
	// Storage is where both streams keep messages. Default (zero) file.
	Storage jetstream.StorageType
	// MaxMsgs bounds the work queue in messages; a full queue rejects new
	// requests (ErrQueueFull). Default 100,000; -1 means unlimited.
	MaxMsgs int64
	// MaxBytes bounds the work queue in bytes. Default 1 GiB; -1 unlimited.
	MaxBytes int64
	// AckWait is how long a worker may hold a message before JetStream
	// redelivers it. Default 30s.
	AckWait time.Duration
	// MaxDeliver is how many attempts a record gets before the worker gives
	// up with a 500 result. The consumer allows one more delivery so a
	// worker can end a record whose attempts all crashed. Default 5.
	MaxDeliver int
	// MaxAckPending bounds unacknowledged messages across all workers. Default 1024.
	MaxAckPending int
	// ResultTTL is how long the results stream keeps a result. Default 10m.
	ResultTTL time.Duration
	// Backoff is the first retry delay after a failed attempt; it doubles
	// with each delivery up to one minute. Default 500ms.
	Backoff time.Duration
}

// Validate reports the first invalid field, wrapping ErrInvalidConfig.
func (c StreamConfig) Validate() error {
	if err := ValidateJob(c.Job); err != nil {
		return fmt.Errorf("%w: Job: %w", ErrInvalidConfig, err)
	}
	switch {
	case c.Replicas < 0 || c.Replicas > 5:
		return fmt.Errorf("%w: Replicas %d not in 0..5", ErrInvalidConfig, c.Replicas)
	case c.Storage != jetstream.FileStorage && c.Storage != jetstream.MemoryStorage:
		return fmt.Errorf("%w: Storage %v unknown", ErrInvalidConfig, c.Storage)
	case c.MaxMsgs < -1:
		return fmt.Errorf("%w: MaxMsgs %d below -1", ErrInvalidConfig, c.MaxMsgs)
	case c.MaxBytes < -1:
		return fmt.Errorf("%w: MaxBytes %d below -1", ErrInvalidConfig, c.MaxBytes)
	}
	return CheckLimits(ErrInvalidConfig, Limit{"AckWait", c.AckWait}, Limit{"MaxDeliver", c.MaxDeliver},
		Limit{"MaxAckPending", c.MaxAckPending}, Limit{"ResultTTL", c.ResultTTL}, Limit{"Backoff", c.Backoff})
}

func (c StreamConfig) withDefaults() StreamConfig {
	c.Replicas = cmp.Or(c.Replicas, DefaultReplicas)
	c.MaxMsgs = cmp.Or(c.MaxMsgs, DefaultMaxMsgs)
	c.MaxBytes = cmp.Or(c.MaxBytes, DefaultMaxBytes)
	c.AckWait = cmp.Or(c.AckWait, DefaultAckWait)
	c.MaxDeliver = cmp.Or(c.MaxDeliver, DefaultMaxDeliver)
	c.MaxAckPending = cmp.Or(c.MaxAckPending, DefaultMaxAckPending)
	c.ResultTTL = cmp.Or(c.ResultTTL, DefaultResultTTL)
	c.Backoff = cmp.Or(c.Backoff, DefaultBackoff)
	return c
}

// backoff is the nak delay after the delivered-th failed attempt.
func (c StreamConfig) backoff(delivered uint64) time.Duration {
	d := c.Backoff
	for i := uint64(1); i < delivered && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

// EnsureStreams creates or updates the job's work-queue stream, its shared
// workers consumer and its results stream. It is idempotent, and several
// processes may call it at start. It returns ErrInvalidConfig or the
// JetStream error wrapped with the object's name.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, cfg StreamConfig) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	work := jetstream.StreamConfig{
		Name:        StreamName(cfg.Job),
		Description: "cluster-serving work queue of job " + cfg.Job,
		Subjects:    []string{WorkSubject(cfg.Job)},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     cfg.Storage,
		Replicas:    cfg.Replicas,
		MaxMsgs:     cfg.MaxMsgs,
		MaxBytes:    cfg.MaxBytes,
		Discard:     jetstream.DiscardNew,
		Duplicates:  DuplicateWindow,
	}
	if err := ensureStream(ctx, js, work); err != nil {
		return err
	}
	cons := jetstream.ConsumerConfig{
		Durable:       WorkersConsumer,
		Description:   "cluster-serving workers of job " + cfg.Job,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxDeliver:    cfg.MaxDeliver + 1,
		MaxAckPending: cfg.MaxAckPending,
		FilterSubject: WorkSubject(cfg.Job),
	}
	if c, err := js.Consumer(ctx, work.Name, cons.Durable); err == nil && sameConsumer(c.CachedInfo().Config, cons) {
		// Up to date: leave it alone (see ensureStream).
	} else if _, err := js.CreateOrUpdateConsumer(ctx, work.Name, cons); err != nil {
		return fmt.Errorf("mesh: ensure consumer %s/%s: %w", work.Name, cons.Durable, err)
	}
	results := jetstream.StreamConfig{
		Name:        ResultsStreamName(cfg.Job),
		Description: "cluster-serving results of job " + cfg.Job,
		Subjects:    []string{ResultsSubject(cfg.Job, ">")},
		Retention:   jetstream.LimitsPolicy,
		Storage:     cfg.Storage,
		Replicas:    cfg.Replicas,
		MaxAge:      cfg.ResultTTL,
		Duplicates:  min(DuplicateWindow, cfg.ResultTTL),
	}
	return ensureStream(ctx, js, results)
}

// ensureStream creates cfg's stream, or updates it when its settings
// differ. A stream that is already as wanted is left alone: every process
// calls EnsureStreams at start, and needless updates of a live stream
// race with its consumers inside nats-server's file store.
func ensureStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) error {
	if st, err := js.Stream(ctx, cfg.Name); err == nil && sameStream(st.CachedInfo().Config, cfg) {
		return nil
	}
	if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("mesh: ensure stream %s: %w", cfg.Name, err)
	}
	return nil
}

func sameStream(have, want jetstream.StreamConfig) bool {
	return slices.Equal(have.Subjects, want.Subjects) && have.Retention == want.Retention &&
		have.Storage == want.Storage && have.Replicas == want.Replicas && have.MaxMsgs == want.MaxMsgs &&
		have.MaxBytes == want.MaxBytes && have.Discard == want.Discard && have.Duplicates == want.Duplicates &&
		have.MaxAge == want.MaxAge
}

func sameConsumer(have, want jetstream.ConsumerConfig) bool {
	return have.AckPolicy == want.AckPolicy && have.AckWait == want.AckWait && have.MaxDeliver == want.MaxDeliver &&
		have.MaxAckPending == want.MaxAckPending && have.FilterSubject == want.FilterSubject
}

// WorkersInfo returns the info of job's shared workers consumer: what waits
// (NumPending), what workers hold (NumAckPending), redeliveries. status and
// the queue-depth gauges both read the queue through it.
func WorkersInfo(ctx context.Context, js jetstream.JetStream, job string) (*jetstream.ConsumerInfo, error) {
	c, err := js.Consumer(ctx, StreamName(job), WorkersConsumer)
	if err != nil {
		return nil, fmt.Errorf("mesh: consumer %s/%s: %w", StreamName(job), WorkersConsumer, err)
	}
	return c.Info(ctx)
}
